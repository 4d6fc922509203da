#!/usr/bin/env Rscript
# Reference scores of mirt 1.45.1's multiple-group fits for ATLAS's group-aware scoring
# (atlascat.irt.groupscore; tests/test_groups_score.py). Run once, from this folder, after
# make_reference.R (it reads responses.csv and groups.csv):
#   Rscript make_score_reference.R
# Fits as make_reference.R's (invariance = c("slopes", "intercepts", "free_means", "free_var"),
# no priors, TOL 1e-6), then fscores(mod, method = "EAP" / "MAP", full.scores.SE = TRUE) with
# its defaults (121 nodes on [-6, 6] for EAP; each subject under its own group's
# N(mean_g, var_g)). Writes, for every 4th subject (500 rows):
#   scores.csv   subject_id, group, then <fit>_<method> and <fit>_<method>_se for the fits
#                2pl and rasch and the methods eap and map (mirt's own scale: the Rasch
#                fit's reference group is N(0, var_A), rasch_fit.csv)
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")
X <- read.csv("responses.csv")
ids <- X$subject_id
X <- as.matrix(X[, -1])
g <- read.csv("groups.csv")
stopifnot(all(g$subject_id == ids))
keep <- seq(1, nrow(X), by = 4)
out <- data.frame(subject_id = ids[keep], group = g$group[keep])
for (itemtype in c("2PL", "Rasch")) {
  mod <- multipleGroup(X, 1, group = factor(g$group, levels = c("A", "B")), itemtype = itemtype,
                       invariance = c("slopes", "intercepts", "free_means", "free_var"),
                       verbose = FALSE, TOL = 1e-6, technical = list(NCYCLES = 5000))
  for (method in c("EAP", "MAP")) {
    fs <- fscores(mod, method = method, full.scores.SE = TRUE)
    col <- paste0(tolower(itemtype), "_", tolower(method))
    out[[col]] <- sprintf("%.12g", fs[keep, 1])
    out[[paste0(col, "_se")]] <- sprintf("%.12g", fs[keep, 2])
  }
}
write.csv(out, "scores.csv", row.names = FALSE, quote = FALSE)
