#!/usr/bin/env Rscript
# Reference multiple-group fit of the partial credit model, mirt 1.45.1 (itemtype "Rasch" of
# ordinal items: every slope 1, the reference group's latent variance estimated), for ATLAS's
# `calibrate(..., "pcm", groups=...)` (tests/test_groups_pcm.py). Run once, from this folder,
# after make_reference_graded.R (its ordinal_responses.csv / ordinal_groups.csv: 2000 subjects,
# 10 items of 4 categories, group B ~ N(0.8, 1.2^2)):  Rscript make_reference_pcm.R
# Fit: multipleGroup(..., itemtype = "Rasch", invariance = c("free_means", "free_var", items)),
# no priors, TOL 1e-6. Writes
#   pcm_ord_items.csv   item_id, a1 (1), d1..d3 (mirt's d0 = 0 left out), group A's
#   pcm_ord_fit.csv     loglik, converged, each group's mean and variance, n_iter, seconds
#   pcm_ord_se.csv      item_id (or GroupPars_A for A's COV_11 in d1, GroupPars_B for B's
#                       MEAN_1 in d1 and COV_11 in d2), the standard errors of d1..d3
#                       (SE = TRUE, SE.type "Oakes")
#   pcm_ord_anova.csv   anova(mirt(X, 1, "Rasch"), grouped): model (stacked, groups), AIC, ...
#   pcm_ord_sx2.csv     itemfit(grouped): group, item, S_X2, df.S_X2, RMSEA.S_X2, p.S_X2
#   pcm_ord_m2.csv, pcm_ord_c2.csv   M2(grouped), M2(grouped, type = "C2") when mirt gives them
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")
num17 <- function(df) {
  for (c in names(df)) if (is.numeric(df[[c]])) df[[c]] <- sprintf("%.17g", df[[c]])
  df
}
X <- read.csv("ordinal_responses.csv")
g <- read.csv("ordinal_groups.csv")
stopifnot(all(g$subject_id == X$subject_id))
X <- as.matrix(X[, -1])
grp <- factor(g$group, levels = c("A", "B"))
fit <- function(...) multipleGroup(X, 1, group = grp, itemtype = "Rasch",
                                   invariance = c("free_means", "free_var", colnames(X)),
                                   verbose = FALSE, TOL = 1e-6,
                                   technical = list(NCYCLES = 5000), ...)
t0 <- proc.time()[["elapsed"]]
mod <- fit()
secs <- proc.time()[["elapsed"]] - t0
cf <- coef(mod, simplify = TRUE)
print(cf$A$cov); print(cf$B$means); print(cf$B$cov)
it <- as.data.frame(cf$A$items)
write.csv(num17(cbind(data.frame(item_id = rownames(it)), it[, c("a1", "d1", "d2", "d3")])),
          "pcm_ord_items.csv", row.names = FALSE, quote = FALSE)
write.csv(num17(data.frame(loglik = extract.mirt(mod, "logLik"),
                           converged = extract.mirt(mod, "converged"),
                           mean_A = cf$A$means[1], var_A = cf$A$cov[1, 1],
                           mean_B = cf$B$means[1], var_B = cf$B$cov[1, 1],
                           n_iter = extract.mirt(mod, "iterations"), seconds = secs)),
          "pcm_ord_fit.csv", row.names = FALSE, quote = FALSE)
mse <- fit(SE = TRUE)
ce <- coef(mse, printSE = TRUE)
print(ce$A$GroupPars); print(ce$B$GroupPars)
pars <- c("d1", "d2", "d3")
rows <- lapply(colnames(X), function(i) {
  v <- ce$A[[i]]
  data.frame(item_id = i, t(setNames(v["SE", pars], pars)))
})
rows[[length(rows) + 1]] <- data.frame(item_id = "GroupPars_A",
                                       d1 = ce$A$GroupPars["SE", "COV_11"], d2 = NA, d3 = NA)
rows[[length(rows) + 1]] <- data.frame(item_id = "GroupPars_B",
                                       d1 = ce$B$GroupPars["SE", "MEAN_1"],
                                       d2 = ce$B$GroupPars["SE", "COV_11"], d3 = NA)
write.csv(num17(do.call(rbind, rows)), "pcm_ord_se.csv", row.names = FALSE, quote = FALSE,
          na = "")
one <- mirt(X, 1, itemtype = "Rasch", verbose = FALSE, TOL = 1e-6,
            technical = list(NCYCLES = 5000))
av <- anova(one, mod)
print(av)
write.csv(num17(cbind(data.frame(model = c("stacked", "groups")), as.data.frame(av))),
          "pcm_ord_anova.csv", row.names = FALSE, quote = FALSE, na = "")
fits <- itemfit(mod)
rows <- do.call(rbind, lapply(names(fits), function(gr)
  cbind(data.frame(group = gr), as.data.frame(fits[[gr]]))))
print(rows)
write.csv(num17(rows), "pcm_ord_sx2.csv", row.names = FALSE, quote = FALSE)
for (type in c("M2*", "C2")) {
  m2 <- try(M2(mod, type = type), silent = TRUE)
  f <- if (type == "C2") "pcm_ord_c2.csv" else "pcm_ord_m2.csv"
  if (!inherits(m2, "try-error")) {
    print(m2)
    write.csv(num17(as.data.frame(m2)), f, row.names = FALSE, quote = FALSE)
  } else cat(type, ":", m2, "\n")
}
t0 <- proc.time()[["elapsed"]]
dm <- multipleGroup(X, 1, group = grp, itemtype = "Rasch",
                    invariance = c("free_means", "free_var", colnames(X)), verbose = FALSE)
cat("pcm default TOL: seconds", proc.time()[["elapsed"]] - t0, "iterations",
    extract.mirt(dm, "iterations"), "logLik", extract.mirt(dm, "logLik"), "\n")
cat("done\n")
