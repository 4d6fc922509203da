#!/usr/bin/env Rscript
# mirt 1.45.1 on a 500 x 60 block of ../shared/data/openllm/dense_arc.csv.gz (rows 1, 5, 9, ...:
# every 4th, 1-based; the first 60 item columns with 10% to 90% right in these rows): a 2PL fitted with mirt's defaults (EM, 61
# nodes, TOL 1e-4 raised to 1e-6) and SE.type = "Oakes", then M2(mod), itemfit(mod) (S-X2) and
# personfit(mod) (Zh at fscores' EAP).
# (tests/test_walk_score_fit.py rebuilds the block from the same rows and the items' ids.)
# Run from this folder: Rscript make_fit.R > make_fit.log
#   -> arc500x60_2pl_items.csv (X, a1, d, SE_a1, SE_d),
#      arc500x60_2pl_m2.csv, arc500x60_2pl_itemfit.csv, arc500x60_2pl_personfit.csv, make_fit.log
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")
D <- read.csv(gzfile("../../../../shared/data/openllm/dense_arc.csv.gz"), check.names = FALSE)
rows <- seq(1, nrow(D), by = 4)[1:500]
vary <- which(sapply(D[rows, -1], function(v) mean(v) >= 0.1 && mean(v) <= 0.9)) + 1
B <- D[rows, c(1, vary[1:60])]
Y <- as.matrix(B[, -1]); colnames(Y) <- paste0("X", colnames(Y))
t0 <- Sys.time()
m <- mirt(Y, 1, "2PL", SE = TRUE, SE.type = "Oakes", TOL = 1e-6, verbose = FALSE)
cat("mirt 2PL + Oakes SE seconds:", as.numeric(difftime(Sys.time(), t0, units = "secs")),
    "iterations:", extract.mirt(m, "iterations"), "logLik:", extract.mirt(m, "logLik"), "\n")
cf <- coef(m, printSE = TRUE)
it <- do.call(rbind, lapply(colnames(Y), function(j) {
  v <- cf[[j]]; data.frame(X = sub("^X", "", j), a1 = v["par", "a1"], d = v["par", "d"],
                           SE_a1 = v["SE", "a1"], SE_d = v["SE", "d"])
}))
f17 <- function(df) { for (c in names(df)) if (is.numeric(df[[c]])) df[[c]] <- sprintf("%.15g", df[[c]]); df }
write.csv(f17(it), "arc500x60_2pl_items.csv", row.names = FALSE, quote = FALSE)
t0 <- Sys.time(); m2 <- M2(m)
cat("M2 seconds:", as.numeric(difftime(Sys.time(), t0, units = "secs")), "\n")
write.csv(f17(as.data.frame(m2)), "arc500x60_2pl_m2.csv", row.names = FALSE, quote = FALSE)
t0 <- Sys.time(); itf <- itemfit(m)
cat("itemfit seconds:", as.numeric(difftime(Sys.time(), t0, units = "secs")), "\n")
itf$item <- sub("^X", "", itf$item)
write.csv(f17(itf), "arc500x60_2pl_itemfit.csv", row.names = FALSE, quote = FALSE)
pf <- personfit(m)
write.csv(f17(data.frame(row = rows, pf)), "arc500x60_2pl_personfit.csv", row.names = FALSE, quote = FALSE)
