#!/usr/bin/env Rscript
# Reference scores and information of mirt 1.45.1 for ATLAS's estimate_ability and
# bank.information / test_information (tests/test_scores_vs_mirt.py). Run once, from this folder:
#   Rscript make_reference.R
# Writes, per fit <name> (lsat7_2pl, lsat7_3pl: mirt's LSAT7 patterns; science_graded,
# science_gpcm: mirt's Science):
#   <name>_items.csv   coef(mod, simplify = TRUE)$items, 17 digits (binary: X,a1,d,g,u;
#                      ordinal: item_id,model,a1,d1..,levels)
#   <name>_info.csv    theta, iteminfo(extract.item(mod, j), theta) per item, testinfo(mod, theta)
#   <name>_scores.csv  the patterns / rows and fscores(mod, method, full.scores.SE = TRUE) for
#                      EAP, MAP, ML, WLE: <method>_theta, <method>_se
# and the data: lsat7.csv (patterns with freq), science.csv (ratings 1-4).
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")

num17 <- function(df) {
  for (c in names(df)) if (is.numeric(df[[c]])) df[[c]] <- sprintf("%.17g", df[[c]])
  df
}
theta <- matrix(seq(-4, 4, by = 0.5))

dump <- function(mod, X, name, ordinal) {
  cf <- coef(mod, simplify = TRUE)$items
  if (ordinal) {
    dn <- setdiff(grep("^d[0-9]", colnames(cf), value = TRUE), "d0")
    lev <- sapply(seq_len(ncol(X)), function(j) paste(sort(unique(X[, j])), collapse = ";"))
    items <- data.frame(item_id = rownames(cf), model = extract.mirt(mod, "itemtype"),
                        a1 = cf[, "a1"], cf[, dn, drop = FALSE], levels = lev)
  } else {
    items <- data.frame(X = rownames(cf), a1 = cf[, "a1"], d = cf[, "d"], g = cf[, "g"],
                        u = cf[, "u"])
  }
  write.csv(num17(items), paste0(name, "_items.csv"), row.names = FALSE, quote = FALSE)
  info <- sapply(seq_len(ncol(X)), function(j) iteminfo(extract.item(mod, j), theta))
  colnames(info) <- colnames(X)
  write.csv(num17(data.frame(theta = theta[, 1], info, test = testinfo(mod, theta),
                             check.names = FALSE)),
            paste0(name, "_info.csv"), row.names = FALSE, quote = FALSE)
  out <- data.frame(row = seq_len(nrow(X)))
  for (m in c("EAP", "MAP", "ML", "WLE")) {
    f <- fscores(mod, method = m, full.scores.SE = TRUE, response.pattern = X)
    out[[paste0(m, "_theta")]] <- f[, "F1"]
    out[[paste0(m, "_se")]] <- f[, "SE_F1"]
  }
  write.csv(num17(out), paste0(name, "_scores.csv"), row.names = FALSE, quote = FALSE)
}

L <- as.data.frame(LSAT7)
names(L) <- c(paste0("item", 1:5), "freq")
write.csv(L, "lsat7.csv", row.names = FALSE)
full <- expand.table(LSAT7); colnames(full) <- paste0("item", 1:5)
pats <- as.matrix(L[, 1:5])
dump(mirt(full, 1, "2PL", verbose = FALSE, TOL = 1e-8), pats, "lsat7_2pl", FALSE)
dump(mirt(full, 1, "3PL", verbose = FALSE), pats, "lsat7_3pl", FALSE)
S <- as.matrix(Science)
write.csv(cbind(data.frame(subject_id = sprintf("s%d", seq_len(nrow(S)))), S), "science.csv",
          row.names = FALSE)
dump(mirt(S, 1, "graded", verbose = FALSE, TOL = 1e-8), S, "science_graded", TRUE)
dump(mirt(S, 1, "gpcm", verbose = FALSE, TOL = 1e-8), S, "science_gpcm", TRUE)
