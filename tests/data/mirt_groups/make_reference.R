#!/usr/bin/env Rscript
# Reference multiple-group fits of mirt 1.45.1 for ATLAS's multiple-group calibration
# (atlascat.irt.groups; tests/test_groups.py). Run once, from this folder:
#   Rscript make_reference.R
# Data: 2000 simulated subjects, 20 2PL items (a ~ lognormal(0, 0.3), d ~ N(0, 1)); group A
# (1000) N(0, 1), group B (1000) N(1, 1.3^2); items 1-3 unanswered by A, 18-20 by B.
# Fits: multipleGroup(..., invariance = c("slopes", "intercepts", "free_means", "free_var")),
# itemtype 2PL and Rasch, no priors, tightened convergence (TOL 1e-6). Writes
#   responses.csv        subject_id, items (blank = missing)
#   groups.csv           subject_id, group
#   <fit>_items.csv      item_id, a1, d (coef(mod, simplify = TRUE), group A's; the same in B)
#   <fit>_fit.csv        loglik, converged, then each group's mean and variance
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")
num17 <- function(df) {
  for (c in names(df)) if (is.numeric(df[[c]])) df[[c]] <- sprintf("%.17g", df[[c]])
  df
}
set.seed(20261129)
N <- 2000; J <- 20
group <- rep(c("A", "B"), each = N / 2)
theta <- ifelse(group == "A", rnorm(N, 0, 1), rnorm(N, 1, 1.3))
a <- matrix(rlnorm(J, 0, 0.3)); d <- matrix(rnorm(J))
X <- simdata(a, d, N, itemtype = "2PL", Theta = matrix(theta))
colnames(X) <- sprintf("Item_%d", 1:J)
X[group == "A", 1:3] <- NA
X[group == "B", 18:20] <- NA
ids <- sprintf("s%d", seq_len(N))
write.csv(cbind(data.frame(subject_id = ids), X), "responses.csv", row.names = FALSE, na = "")
write.csv(data.frame(subject_id = ids, group = group), "groups.csv", row.names = FALSE,
          quote = FALSE)
for (itemtype in c("2PL", "Rasch")) {
  mod <- multipleGroup(X, 1, group = factor(group, levels = c("A", "B")), itemtype = itemtype,
                       invariance = c("slopes", "intercepts", "free_means", "free_var"),
                       verbose = FALSE, TOL = 1e-6, technical = list(NCYCLES = 5000))
  cf <- coef(mod, simplify = TRUE)
  it <- cf$A$items
  name <- tolower(itemtype)
  write.csv(num17(data.frame(item_id = rownames(it), a1 = it[, "a1"], d = it[, "d"])),
            paste0(name, "_items.csv"), row.names = FALSE, quote = FALSE)
  write.csv(num17(data.frame(loglik = extract.mirt(mod, "logLik"),
                             converged = extract.mirt(mod, "converged"),
                             mean_A = cf$A$means[1], var_A = cf$A$cov[1, 1],
                             mean_B = cf$B$means[1], var_B = cf$B$cov[1, 1],
                             n_iter = extract.mirt(mod, "iterations"))),
            paste0(name, "_fit.csv"), row.names = FALSE, quote = FALSE)
}
