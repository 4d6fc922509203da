#!/usr/bin/env Rscript
# Reference anova and item fit of mirt 1.45.1's multiple-group graded / GPCM fits for ATLAS's
# ordinal grouped anova and S-X2 (tests/test_groups_ordinal_fit.py). Run once, from this
# folder, after make_reference_graded.R:  Rscript make_fit_reference_graded.R
# Fits (no priors, TOL 1e-6): each model stacked (mirt(X, 1, itemtype)) and with the groups
# (make_reference_graded.R's multipleGroup, free means and variances). Writes
#   <fit>_ord_anova.csv  model (stacked, groups), AIC, SABIC, HQ, BIC, logLik, X2, df, p
#                        (anova(stacked, grouped))
#   <fit>_ord_sx2.csv    group, item, S_X2, df.S_X2, RMSEA.S_X2, p.S_X2 (itemfit(grouped))
#   <fit>_ord_m2.csv     M2(grouped) (type M2*), when mirt gives it; its message otherwise
#   <fit>_ord_c2.csv     M2(grouped, type = "C2"), the same way
#   (the grouped fit's parameters are make_reference_graded.R's <fit>_ord_items.csv)
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
for (itemtype in c("graded", "gpcm")) {
  mod <- multipleGroup(X, 1, group = grp, itemtype = itemtype,
                       invariance = c("free_means", "free_var", colnames(X)),
                       verbose = FALSE, TOL = 1e-6, technical = list(NCYCLES = 5000))
  ref <- read.csv(paste0(itemtype, "_ord_items.csv"))
  it <- coef(mod, simplify = TRUE)$A$items
  stopifnot(max(abs(it[, "a1"] - ref$a1)) < 1e-12)     # the same fit as the items file's
  one <- mirt(X, 1, itemtype = itemtype, verbose = FALSE, TOL = 1e-6,
              technical = list(NCYCLES = 5000))
  av <- anova(one, mod)
  print(av)
  write.csv(num17(cbind(data.frame(model = c("stacked", "groups")), as.data.frame(av))),
            paste0(itemtype, "_ord_anova.csv"), row.names = FALSE, quote = FALSE, na = "")
  fits <- itemfit(mod)
  rows <- do.call(rbind, lapply(names(fits), function(gr)
    cbind(data.frame(group = gr), as.data.frame(fits[[gr]]))))
  print(rows)
  write.csv(num17(rows), paste0(itemtype, "_ord_sx2.csv"), row.names = FALSE, quote = FALSE)
  m2 <- try(M2(mod), silent = TRUE)
  if (!inherits(m2, "try-error")) {
    print(m2)
    write.csv(num17(as.data.frame(m2)), paste0(itemtype, "_ord_m2.csv"), row.names = FALSE,
              quote = FALSE)
  } else cat(itemtype, "M2:", m2, "\n")
  c2 <- try(M2(mod, type = "C2"), silent = TRUE)
  if (!inherits(c2, "try-error")) {
    print(c2)
    write.csv(num17(as.data.frame(c2)), paste0(itemtype, "_ord_c2.csv"), row.names = FALSE,
              quote = FALSE)
  } else cat(itemtype, "C2:", c2, "\n")
}
