#!/usr/bin/env Rscript
# mirt 1.45.1 fscores on the paper's ARC 3PL bank (parameters fixed, est = FALSE) for 60 rows of
# ../shared/data/openllm/dense_arc.csv.gz (rows 1, 38, 75, ...: every 37th, 1-based), on the 292
# items the bank and the matrix share, plus an all-right and an all-wrong pattern; then the same
# rows with about 20% of the cells blank (cell i, j of the 62 x 292 block, 1-based, is blank
# where (7 i + 3 j) %% 5 == 0). fscores' own defaults (EAP: 121 nodes on [-6, 6], N(0, 1)).
# Run from this folder: Rscript make_scores.R  -> arc_scores.csv
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")
sh <- "../../../../shared/data"
D <- read.csv(gzfile(file.path(sh, "openllm/dense_arc.csv.gz")), check.names = FALSE)
bank <- read.csv(file.path(sh, "atlas_banks/arc_3pl_bank.csv"))
bank$X <- sub("^X", "", bank$X)
keep <- intersect(colnames(D)[-1], bank$X)
bank <- bank[match(keep, bank$X), ]
rows <- seq(1, nrow(D), by = 37)
Y <- rbind(as.matrix(D[rows, keep]), 1, 0)
colnames(Y) <- paste0("i", keep)
sv <- mirt(Y, 1, "3PL", pars = "values")
for (p in c("a1", "d", "g", "u")) {
  r <- sv$name == p & sv$item %in% colnames(Y)
  sv$value[r] <- bank[[p]][match(sv$item[r], colnames(Y))]; sv$est[r] <- FALSE
}
m <- mirt(Y, 1, "3PL", pars = sv, verbose = FALSE)
M <- Y
blank <- outer(seq_len(nrow(M)), seq_len(ncol(M)), function(i, j) (7 * i + 3 * j) %% 5 == 0)
M[blank] <- NA
out <- data.frame(row = c(rows, -1, -2))   # -1: all right, -2: all wrong
for (set in c("full", "missing")) {
  P <- if (set == "full") Y else M
  for (meth in c("EAP", "MAP", "ML")) {
    f <- fscores(m, method = meth, full.scores.SE = TRUE, response.pattern = P)
    out[[paste(set, meth, "theta", sep = "_")]] <- sprintf("%.12g", f[, "F1"])
    out[[paste(set, meth, "se", sep = "_")]] <- sprintf("%.12g", f[, "SE_F1"])
  }
}
write.csv(out, "arc_scores.csv", row.names = FALSE, quote = FALSE)
