#!/usr/bin/env Rscript
# Reference standard errors of mirt 1.45.1's multiple-group fits for ATLAS's multiple-group
# standard errors (atlascat.irt.groupse; tests/test_groups_se.py). Run once, from this folder,
# after make_reference.R (it reads responses.csv and groups.csv):
#   Rscript make_se_reference.R
# Fits as make_reference.R's (invariance = c("slopes", "intercepts", "free_means", "free_var"),
# no priors, TOL 1e-6) with SE = TRUE (SE.type "Oakes", mirt's default for EM). Writes
#   <fit>_se.csv   group, par, value, se: each group's item parameters (a1, d; the same in
#                  every group) and MEAN_1, COV_11 from coef(mod, printSE = TRUE) (se NA where
#                  the parameter is fixed)
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")
X <- read.csv("responses.csv")
ids <- X$subject_id
X <- as.matrix(X[, -1])
g <- read.csv("groups.csv")
stopifnot(all(g$subject_id == ids))
for (itemtype in c("2PL", "Rasch")) {
  mod <- multipleGroup(X, 1, group = factor(g$group, levels = c("A", "B")), itemtype = itemtype,
                       invariance = c("slopes", "intercepts", "free_means", "free_var"),
                       verbose = FALSE, TOL = 1e-6, technical = list(NCYCLES = 5000),
                       SE = TRUE)
  cf <- coef(mod, printSE = TRUE)
  rows <- list()
  for (grp in names(cf)) {
    for (nm in names(cf[[grp]])) {
      m <- cf[[grp]][[nm]]
      for (p in colnames(m)) {
        if (!(p %in% c("a1", "d", "MEAN_1", "COV_11"))) next
        rows[[length(rows) + 1]] <- data.frame(group = grp, item = nm, par = p,
                                               value = sprintf("%.17g", m["par", p]),
                                               se = sprintf("%.17g", m["SE", p]))
      }
    }
  }
  out <- do.call(rbind, rows)
  write.csv(out, paste0(tolower(itemtype), "_se.csv"), row.names = FALSE, quote = FALSE)
  cat(itemtype, "logLik", extract.mirt(mod, "logLik"), "iterations",
      extract.mirt(mod, "iterations"), "\n")
}
