#!/usr/bin/env Rscript
# Reference multiple-group fits of ordinal items, mirt 1.45.1, for ATLAS's multiple-group
# graded / GPCM calibration (atlascat.irt.polyfit with groups; tests/test_groups_ordinal.py).
# Run once, from this folder:  Rscript make_reference_graded.R
# Data: 2000 simulated subjects, 10 graded items of 4 categories (a ~ lognormal(0, 0.3),
# intercepts sorted N(0, 1.2^2) draws); group A (1000) N(0, 1), group B (1000) N(0.8, 1.2^2).
# Fits: multipleGroup(..., invariance = c("free_means", "free_var", items)), itemtype graded
# and gpcm, no priors, TOL 1e-6. Writes
#   ordinal_responses.csv, ordinal_groups.csv   subject_id, items / group
#   <fit>_ord_items.csv   item_id, a1, d1..d3 (graded) or a1, d0..d3 (gpcm), group A's
#   <fit>_ord_fit.csv     loglik, converged, each group's mean and variance, n_iter, seconds
#   <fit>_ord_se.csv      item_id (or GroupPars for group B's MEAN_1, COV_11), the standard
#                         errors of a1, d1..d3 (SE = TRUE, mirt's SE.type "Oakes")
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")
num17 <- function(df) {
  for (c in names(df)) if (is.numeric(df[[c]])) df[[c]] <- sprintf("%.17g", df[[c]])
  df
}
set.seed(20261130)
N <- 2000; J <- 10
group <- rep(c("A", "B"), each = N / 2)
theta <- ifelse(group == "A", rnorm(N, 0, 1), rnorm(N, 0.8, 1.2))
a <- matrix(rlnorm(J, 0, 0.3))
d <- t(apply(matrix(rnorm(J * 3, 0, 1.2), J), 1, sort, decreasing = TRUE))
X <- simdata(a, d, N, itemtype = "graded", Theta = matrix(theta))
colnames(X) <- sprintf("Item_%d", 1:J)
ids <- sprintf("s%d", seq_len(N))
write.csv(cbind(data.frame(subject_id = ids), X), "ordinal_responses.csv", row.names = FALSE,
          na = "")
write.csv(data.frame(subject_id = ids, group = group), "ordinal_groups.csv", row.names = FALSE,
          quote = FALSE)
for (itemtype in c("graded", "gpcm")) {
  t0 <- proc.time()[["elapsed"]]
  mod <- multipleGroup(X, 1, group = factor(group, levels = c("A", "B")), itemtype = itemtype,
                       invariance = c("free_means", "free_var", colnames(X)),
                       verbose = FALSE, TOL = 1e-6, technical = list(NCYCLES = 5000))
  secs <- proc.time()[["elapsed"]] - t0
  mse <- multipleGroup(X, 1, group = factor(group, levels = c("A", "B")), itemtype = itemtype,
                       invariance = c("free_means", "free_var", colnames(X)), SE = TRUE,
                       verbose = FALSE, TOL = 1e-6, technical = list(NCYCLES = 5000))
  ce <- coef(mse, printSE = TRUE)
  pars <- c("a1", "d1", "d2", "d3")   # GPCM: d0 = 0 has no SE
  rows <- lapply(colnames(X), function(i) {
    v <- ce$A[[i]]
    data.frame(item_id = i, t(setNames(v["SE", pars], pars)))
  })
  gp <- ce$B$GroupPars
  rows[[length(rows) + 1]] <- data.frame(item_id = "GroupPars_B", a1 = gp["SE", "MEAN_1"],
                                         d1 = gp["SE", "COV_11"], d2 = NA, d3 = NA)
  write.csv(num17(do.call(rbind, rows)), paste0(itemtype, "_ord_se.csv"), row.names = FALSE,
            quote = FALSE, na = "")
  cf <- coef(mod, simplify = TRUE)
  it <- as.data.frame(cf$A$items)
  keep <- if (itemtype == "graded") c("a1", "d1", "d2", "d3") else c("a1", "d0", "d1", "d2", "d3")
  write.csv(num17(cbind(data.frame(item_id = rownames(it)), it[, keep])),
            paste0(itemtype, "_ord_items.csv"), row.names = FALSE, quote = FALSE)
  write.csv(num17(data.frame(loglik = extract.mirt(mod, "logLik"),
                             converged = extract.mirt(mod, "converged"),
                             mean_A = cf$A$means[1], var_A = cf$A$cov[1, 1],
                             mean_B = cf$B$means[1], var_B = cf$B$cov[1, 1],
                             n_iter = extract.mirt(mod, "iterations"), seconds = secs)),
            paste0(itemtype, "_ord_fit.csv"), row.names = FALSE, quote = FALSE)
}
# timing at mirt's default tolerance (TOL 1e-4), the setting atlas calibrate uses by default
for (itemtype in c("graded", "gpcm")) {
  t0 <- proc.time()[["elapsed"]]
  mod <- multipleGroup(X, 1, group = factor(group, levels = c("A", "B")), itemtype = itemtype,
                       invariance = c("free_means", "free_var", colnames(X)), verbose = FALSE)
  cat(itemtype, "default TOL: seconds", proc.time()[["elapsed"]] - t0, "iterations",
      extract.mirt(mod, "iterations"), "logLik", extract.mirt(mod, "logLik"), "\n")
}
