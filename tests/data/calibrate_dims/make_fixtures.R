# Reference values for tests/test_calibrate_dims.py (mirt 1.45.1).
# Run from the repository root: Rscript tests/data/calibrate_dims/make_fixtures.R [OUTDIR]
# Data: tests/data/oblimin/corr2f.csv (2000 x 12, two correlated factors; made there).
# mirt(data, 1) and mirt(data, 2) with itemtype = "2PL" (mirt's defaults otherwise: no priors,
# EM, 61 / 31 quadrature points per dimension on [-6, 6]); anova(mod1, mod2) as printed, and
# summary(mod2) (oblimin) loadings and factor correlation.
suppressMessages(library(mirt))
args <- commandArgs(TRUE); out <- if (length(args)) args[1] else "tests/data/calibrate_dims"
y <- read.csv("tests/data/oblimin/corr2f.csv", row.names = 1)
m1 <- mirt(y, 1, itemtype = "2PL", verbose = FALSE)
m2 <- mirt(y, 2, itemtype = "2PL", verbose = FALSE)
av <- anova(m1, m2)
write.csv(data.frame(model = c("2PL 1F", "2PL 2F"), AIC = av$AIC, SABIC = av$SABIC, HQ = av$HQ,
                     BIC = av$BIC, logLik = av$logLik, X2 = av$X2, df = av$df, p = av$p,
                     n_parameters = c(extract.mirt(m1, "nest"), extract.mirt(m2, "nest"))),
          file.path(out, "corr2f_anova.csv"), row.names = FALSE)
so <- summary(m2, verbose = FALSE)          # rotate = "oblimin", mirt's default
write.csv(data.frame(item_id = colnames(y), F1 = so$rotF[, 1], F2 = so$rotF[, 2], h2 = so$h2[, 1]),
          file.path(out, "corr2f_oblimin.csv"), row.names = FALSE)
write.csv(data.frame(phi12 = so$fcor[1, 2]), file.path(out, "corr2f_fcor.csv"), row.names = FALSE)
