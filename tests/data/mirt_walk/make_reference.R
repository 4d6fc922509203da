# mirt 1.45.1 references for tests/test_walk_mirt_user.py (a mirt user's walk through atlas).
# LSAT7 (mirt's data, as a pattern table with its frequencies: lsat7_patterns.csv).
# anova_prior.csv: anova(Rasch, 2PL with PRIOR = (1-5, a1, lnorm, 0, 1)) - with a prior mirt
#   reports logPost (logLik + logPrior) and df, no X2 / p (a posterior mode is no ML fit).
# g2.csv: G2, df, p, RMSEA of print(mod) (extract.mirt) - LSAT7 Rasch / 2PL / 3PL, Science
#   (science.csv, mirt's data) graded / gpcm / Rasch (atlas: pcm); TOL = 1e-6.
# science_graded_coef.csv: write.csv(coef(mod, simplify = TRUE)$items) of Science's graded fit
#   (row names as the unnamed first column, no levels), science_graded_eap.csv its
#   fscores(mod, full.scores.SE = TRUE) (EAP).
# lsat7_personfit.csv: personfit(mod, method = "MAP") of LSAT7's 2PL (TOL = 1e-6) per pattern,
#   with the MAP theta and the fit's parameters (lsat7_2pl_coef.csv).
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
data(Science)
write.csv(data.frame(subject = paste0("s", seq_len(nrow(Science))), Science), "science.csv",
          row.names = FALSE)
g2row <- function(data, itemtype, name, fit) {
  m <- mirt(data, 1, itemtype, verbose = FALSE, TOL = 1e-6)
  data.frame(data = name, model = fit, G2 = extract.mirt(m, "G2"), df = extract.mirt(m, "df"),
             p = extract.mirt(m, "p"), RMSEA = extract.mirt(m, "RMSEA"))
}
g2 <- rbind(g2row(d, "Rasch", "lsat7", "rasch"), g2row(d, "2PL", "lsat7", "2pl"),
            g2row(d, "3PL", "lsat7", "3pl"), g2row(Science, "graded", "science", "graded"),
            g2row(Science, "gpcm", "science", "gpcm"), g2row(Science, "Rasch", "science", "pcm"))
write.csv(g2, "g2.csv", row.names = FALSE)
graded <- mirt(Science, 1, "graded", verbose = FALSE, TOL = 1e-6)
write.csv(coef(graded, simplify = TRUE)$items, "science_graded_coef.csv")
write.csv(fscores(graded, full.scores.SE = TRUE), "science_graded_eap.csv", row.names = FALSE)
twopl <- mirt(d, 1, "2PL", verbose = FALSE, TOL = 1e-6)
cf <- coef(twopl, simplify = TRUE)$items
write.csv(data.frame(X = rownames(cf), cf), "lsat7_2pl_coef.csv", row.names = FALSE)
pf <- data.frame(d, theta = fscores(twopl, method = "MAP")[, 1], personfit(twopl, method = "MAP"))
write.csv(unique(pf), "lsat7_personfit.csv", row.names = FALSE)
