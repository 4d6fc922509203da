#!/usr/bin/env Rscript
# Reference item fit of mirt 1.45.1's multiple-group fit for ATLAS's group-aware S-X2
# (tests/test_groups_score.py). Run once, from this folder, after make_reference.R:
#   Rscript make_fit_reference.R
# The items every subject answered (Item_4..Item_17 of responses.csv: S-X2 needs complete
# answers), fitted as make_reference.R's 2PL (invariance = c("slopes", "intercepts",
# "free_means", "free_var"), no priors, TOL 1e-6). Writes
#   fit_items.csv   item_id, a1, d; then the groups' mean and variance in fit_groups.csv
#   fit_sx2.csv     group, item, S_X2, df.S_X2, RMSEA.S_X2, p.S_X2 (itemfit(mod), per group)
#   fit_m2.csv      M2, df, p, RMSEA, SRMSR (M2(mod)) when mirt gives it
#   fit_rasch_items.csv, fit_rasch_groups.csv, fit_rasch_sx2.csv, fit_rasch_m2.csv: the same
#                   of the Rasch fit
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")
num17 <- function(df) {
  for (c in names(df)) if (is.numeric(df[[c]])) df[[c]] <- sprintf("%.17g", df[[c]])
  df
}
X <- read.csv("responses.csv")
g <- read.csv("groups.csv")
stopifnot(all(g$subject_id == X$subject_id))
X <- as.matrix(X[, sprintf("Item_%d", 4:17)])
mod <- multipleGroup(X, 1, group = factor(g$group, levels = c("A", "B")), itemtype = "2PL",
                     invariance = c("slopes", "intercepts", "free_means", "free_var"),
                     verbose = FALSE, TOL = 1e-6, technical = list(NCYCLES = 5000))
cf <- coef(mod, simplify = TRUE)
it <- cf$A$items
write.csv(num17(data.frame(item_id = rownames(it), a1 = it[, "a1"], d = it[, "d"])),
          "fit_items.csv", row.names = FALSE, quote = FALSE)
write.csv(num17(data.frame(group = c("A", "B"), mean = c(cf$A$means[1], cf$B$means[1]),
                           var = c(cf$A$cov[1, 1], cf$B$cov[1, 1]))),
          "fit_groups.csv", row.names = FALSE, quote = FALSE)
fits <- itemfit(mod)
rows <- do.call(rbind, lapply(names(fits), function(grp)
  cbind(data.frame(group = grp), as.data.frame(fits[[grp]]))))
write.csv(num17(rows), "fit_sx2.csv", row.names = FALSE, quote = FALSE)
mr <- multipleGroup(X, 1, group = factor(g$group, levels = c("A", "B")), itemtype = "Rasch",
                    invariance = c("slopes", "intercepts", "free_means", "free_var"),
                    verbose = FALSE, TOL = 1e-6, technical = list(NCYCLES = 5000))
cr <- coef(mr, simplify = TRUE)
write.csv(num17(data.frame(item_id = rownames(cr$A$items), d = cr$A$items[, "d"])),
          "fit_rasch_items.csv", row.names = FALSE, quote = FALSE)
write.csv(num17(data.frame(group = c("A", "B"), mean = c(cr$A$means[1], cr$B$means[1]),
                           var = c(cr$A$cov[1, 1], cr$B$cov[1, 1]))),
          "fit_rasch_groups.csv", row.names = FALSE, quote = FALSE)
fr <- itemfit(mr)
rows <- do.call(rbind, lapply(names(fr), function(grp)
  cbind(data.frame(group = grp), as.data.frame(fr[[grp]]))))
write.csv(num17(rows), "fit_rasch_sx2.csv", row.names = FALSE, quote = FALSE)
write.csv(num17(as.data.frame(M2(mr))), "fit_rasch_m2.csv", row.names = FALSE, quote = FALSE)
m2 <- try(M2(mod), silent = TRUE)
if (!inherits(m2, "try-error")) {
  print(m2)
  write.csv(num17(as.data.frame(m2)), "fit_m2.csv", row.names = FALSE, quote = FALSE)
} else cat("M2:", m2, "\n")
