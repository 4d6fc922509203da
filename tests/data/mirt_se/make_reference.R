#!/usr/bin/env Rscript
# Reference outputs of mirt 1.45.1 for atlascat's standard errors, information criteria and
# anova (tests/test_se.py, tests/test_compare.py). Run once from this folder:
#   Rscript make_reference.R
# Writes, per fit: <name>_items.csv (item, parameter, value, se in mirt's order),
# <name>_fit.json (loglik, n_parameters, AIC, BIC, SABIC, HQ, SE.type, latent variance and its SE),
# and anova_lsat7_rasch_2pl.csv (anova(rasch, 2pl)); make_reference.log is this script's output.
suppressPackageStartupMessages(library(mirt))
options(digits = 15)

dump_fit <- function(mod, name) {
  cf <- coef(mod, printSE = TRUE)
  rows <- list()
  for (it in names(cf)) {
    if (it == "GroupPars") next
    m <- cf[[it]]
    for (p in colnames(m)) {
      se <- if ("SE" %in% rownames(m)) m["SE", p] else NA
      rows[[length(rows) + 1]] <- data.frame(item = it, parameter = p, value = m["par", p], se = se)
    }
  }
  write.csv(do.call(rbind, rows), paste0(name, "_items.csv"), row.names = FALSE)
  g <- cf$GroupPars
  fit <- list(loglik = extract.mirt(mod, "logLik"), n_parameters = extract.mirt(mod, "nest"),
              df = extract.mirt(mod, "df"),
              AIC = extract.mirt(mod, "AIC"), BIC = extract.mirt(mod, "BIC"),
              SABIC = extract.mirt(mod, "SABIC"), HQ = extract.mirt(mod, "HQ"),
              SE_type = mod@Options$SE.type, n = nrow(extract.mirt(mod, "data")),
              latent_variance = unname(g["par", "COV_11"]),
              latent_variance_se = if ("SE" %in% rownames(g)) unname(g["SE", "COV_11"]) else NA,
              converged = extract.mirt(mod, "converged"), mirt = as.character(packageVersion("mirt")))
  writeLines(jsonlite::toJSON(fit, auto_unbox = TRUE, digits = NA), paste0(name, "_fit.json"))
  mod
}

lsat7 <- expand.table(LSAT7)
m2 <- dump_fit(mirt(lsat7, 1, "2PL", SE = TRUE, verbose = FALSE), "lsat7_2pl")
mr <- dump_fit(mirt(lsat7, 1, "Rasch", SE = TRUE, verbose = FALSE), "lsat7_rasch")
m3 <- dump_fit(mirt(lsat7, 1, "3PL", SE = TRUE, verbose = FALSE), "lsat7_3pl")
av <- anova(mr, m2)
write.csv(data.frame(model = c("rasch", "2pl"), av, check.names = FALSE),
          "anova_lsat7_rasch_2pl.csv", row.names = FALSE)
ms <- dump_fit(mirt(Science, 1, "graded", SE = TRUE, verbose = FALSE), "science_graded")
mg <- dump_fit(mirt(Science, 1, "gpcm", SE = TRUE, verbose = FALSE), "science_gpcm")
# mirt's default TOL stops the GPCM before its maximum (Future's a1 2.204 vs 2.237): the SEs
# at the converged estimate, for comparing a fit that reaches it
mgt <- dump_fit(mirt(Science, 1, "gpcm", SE = TRUE, verbose = FALSE, TOL = 1e-8,
                     technical = list(NCYCLES = 10000)),
                "science_gpcm_tight")
write.csv(Science, "science.csv", row.names = FALSE)
cat("SE.type default for EM:", m2@Options$SE.type, "\n")
print(av)
# the partial credit model (mirt's "Rasch" of ordinal items: slopes 1, latent variance free),
# nested in the GPCM: anova(pcm, gpcm)
mp <- dump_fit(mirt(Science, 1, "Rasch", SE = TRUE, verbose = FALSE, TOL = 1e-8,
                    technical = list(NCYCLES = 10000)), "science_pcm")
write.csv(data.frame(model = c("pcm", "gpcm"), anova(mp, mgt), check.names = FALSE),
          "anova_science_pcm_gpcm.csv", row.names = FALSE)
