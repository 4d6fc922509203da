# mirt 1.45.1 references for tests/test_walk_mirt_user.py (a mirt user's walk through atlas).
# LSAT7 (mirt's data, as a pattern table with its frequencies: lsat7_patterns.csv).
# anova_prior.csv: anova(Rasch, 2PL with PRIOR = (1-5, a1, lnorm, 0, 1)) - with a prior mirt
#   reports logPost (logLik + logPrior) and df, no X2 / p (a posterior mode is no ML fit).
# Run from this folder: Rscript make_reference.R
suppressPackageStartupMessages(library(mirt))
data(LSAT7)
tab <- as.data.frame(LSAT7); names(tab)[6] <- "freq"
write.csv(tab, "lsat7_patterns.csv", row.names = FALSE)
d <- expand.table(LSAT7)
rasch <- mirt(d, 1, "Rasch", verbose = FALSE, TOL = 1e-6)
twopl_prior <- mirt(d, mirt.model("F = 1-5\nPRIOR = (1-5, a1, lnorm, 0, 1)"), "2PL",
                    verbose = FALSE, TOL = 1e-6)
a <- anova(rasch, twopl_prior)
write.csv(data.frame(model = c("rasch", "2pl"), a), "anova_prior.csv", row.names = FALSE)
