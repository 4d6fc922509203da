# ML, MAP and WLE of three patterns on a 4PL bank with steep items (a up to 10.5), by mirt 1.45.1
# with the bank's parameters fixed. Pattern s30 has two likelihood modes 1.25 apart whose
# grid values (step 0.25) rank them the wrong way round.
# Run from tests/data/mirt_scores: Rscript make_steep_4pl.R  -> steep_4pl_scores.csv
suppressPackageStartupMessages(library(mirt))
bank <- read.csv("steep_4pl_items.csv"); pat <- read.csv("steep_4pl_patterns.csv", check.names = FALSE)
Y <- as.matrix(pat[, -1]); colnames(Y) <- bank$X
D <- rbind(Y, 0, 1)   # every item needs both answers to build the model (parameters are fixed)
sv <- mirt(D, 1, "4PL", pars = "values")
for (j in seq_len(nrow(bank))) {
  for (p in c("a1", "d", "g", "u")) {
    r <- sv$item == bank$X[j] & sv$name == p
    sv$value[r] <- bank[[p]][j]; sv$est[r] <- FALSE
  }
}
m <- mirt(D, 1, "4PL", pars = sv, verbose = FALSE)
out <- data.frame(id = pat[[1]])
for (meth in c("ML", "MAP")) {
  f <- fscores(m, method = meth, response.pattern = Y, full.scores.SE = TRUE)
  out[[paste0(tolower(meth), "_theta")]] <- f[, "F1"]
}
write.csv(out, "steep_4pl_scores.csv", row.names = FALSE)
