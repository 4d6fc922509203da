#!/usr/bin/env Rscript
# Reference outputs of mirt 1.45.1 for ATLAS's graded response and generalized partial credit
# models (tests/test_polytomous_parity.py). Run once, from this folder:
#   Rscript make_reference.R
# Writes science.csv (mirt's Science data), sim_graded.csv (20 items, 5 categories, 1000
# subjects, simdata with set.seed(20261127)) and, per fit, <name>_items.csv (coef(simplify=TRUE),
# mirt's slope-intercept form a1, d1..dk; gpcm: d1..dk with d0 = 0), <name>_eap.csv (fscores
# EAP with SE; on Science also MAP, ML and WLE: science_<model>_<method>.csv),
# <name>_summary.json (logLik, AIC, BIC, iterations); *_tight: the same fit to TOL = 1e-8.
suppressPackageStartupMessages(library(mirt))

dump_fit <- function(mod, name, ids, eap = TRUE) {
  items <- coef(mod, simplify = TRUE)$items
  it <- data.frame(item_id = rownames(items), a1 = items[, "a1"])
  dcols <- grep("^d[0-9]+$", colnames(items), value = TRUE)
  dcols <- setdiff(dcols, "d0")       # gpcm: d0 = 0 is fixed
  for (d in dcols) it[[d]] <- items[, d]
  write.csv(it, paste0(name, "_items.csv"), row.names = FALSE, na = "")
  if (eap) {
    fs <- fscores(mod, method = "EAP", full.scores.SE = TRUE)
    write.csv(data.frame(id = ids, theta = fs[, 1], se = fs[, 2]),
              paste0(name, "_eap.csv"), row.names = FALSE)
  }
  s <- sprintf('{"loglik": %.10f, "aic": %.10f, "bic": %.10f, "n_iter": %d, "converged": %s}',
               extract.mirt(mod, "logLik"), extract.mirt(mod, "AIC"), extract.mirt(mod, "BIC"),
               extract.mirt(mod, "iterations"), tolower(extract.mirt(mod, "converged")))
  writeLines(s, paste0(name, "_summary.json"))
  cat(name, s, "\n")
}

sci <- Science
ids <- paste0("s", seq_len(nrow(sci)))
write.csv(cbind(subject_id = ids, sci), "science.csv", row.names = FALSE)
for (type in c("graded", "gpcm")) {
  mod <- mirt(sci, 1, itemtype = type, verbose = FALSE)
  dump_fit(mod, paste0("science_", type), ids)
  # MAP, ML and WLE scores on the same fit (ML: +-Inf for extreme patterns)
  for (method in c("MAP", "ML", "WLE")) {
    fs <- fscores(mod, method = method, full.scores.SE = TRUE)
    write.csv(data.frame(id = ids, theta = fs[, 1], se = fs[, 2]),
              paste0("science_", type, "_", tolower(method), ".csv"), row.names = FALSE)
  }
}
# mirt's default TOL = 1e-4 stops where the EM's steps are small, not at the maximum: on
# Science that point is up to 0.01 from it in the slopes. The same fits run to TOL = 1e-8
# give the maximum itself (*_tight), which the parameter tests compare with.
tight <- list(NCYCLES = 5000)
dump_fit(mirt(sci, 1, itemtype = "graded", verbose = FALSE, TOL = 1e-8, technical = tight),
         "science_graded_tight", ids, eap = FALSE)
dump_fit(mirt(sci, 1, itemtype = "gpcm", verbose = FALSE, TOL = 1e-8, technical = tight),
         "science_gpcm_tight", ids, eap = FALSE)

set.seed(20261127)
a <- matrix(rlnorm(20, 0.2, 0.3))
d <- t(apply(matrix(rnorm(20 * 4, 0, 1.2), 20), 1, function(v) sort(v, decreasing = TRUE)))
d <- d + matrix(rnorm(20, 0, 0.5), 20, 4)
sim <- simdata(a, d, N = 1000, itemtype = "graded")
colnames(sim) <- paste0("Item_", 1:20)
sids <- paste0("p", seq_len(nrow(sim)))
write.csv(cbind(subject_id = sids, sim), "sim_graded.csv", row.names = FALSE)
write.csv(data.frame(item_id = colnames(sim), a1 = a[, 1], d1 = d[, 1], d2 = d[, 2],
                     d3 = d[, 3], d4 = d[, 4]), "sim_graded_truth.csv", row.names = FALSE)
dump_fit(mirt(sim, 1, itemtype = "graded", verbose = FALSE), "sim_graded", sids)
dump_fit(mirt(sim, 1, itemtype = "graded", verbose = FALSE, TOL = 1e-8, technical = tight),
         "sim_graded_tight", sids, eap = FALSE)
