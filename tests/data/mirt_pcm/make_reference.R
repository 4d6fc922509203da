#!/usr/bin/env Rscript
# Reference single-group fit of the partial credit model, mirt 1.45.1 (itemtype "Rasch" of
# ordinal items: every slope 1, the latent variance estimated), for ATLAS's own pcm bank
# (`calibrate(..., model="pcm")`, `atlas fit RATINGS --bank pcm_bank.csv`;
# tests/test_pcm_bank.py). Run once, from this folder:  Rscript make_reference.R
# Data: ../mirt_poly/science.csv (392 x 4 items of 4 categories) and
# ../mirt_groups/ordinal_responses.csv (2000 x 10 items of 4 categories). Fit: mirt(X, 1,
# itemtype = "Rasch"), TOL 1e-6. Writes, per data set <name> (science, ordinal):
#   <name>_pcm_fit.csv      loglik, the latent variance, n_iter
#   <name>_pcm_items.csv    item_id, a1 (1), d1..d3 (mirt's d0 = 0 left out)
#   <name>_pcm_m2.csv       M2(mod, type) for M2* and C2: M2, df, p, RMSEA, SRMSR, TLI, CFI
#                           (a statistic mirt refuses: its message in `error`)
#   <name>_pcm_itemfit.csv  itemfit(mod): S_X2, df_S_X2, RMSEA_S_X2, p_S_X2
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")
num17 <- function(df) {
  for (c in names(df)) if (is.numeric(df[[c]])) df[[c]] <- sprintf("%.17g", df[[c]])
  df
}
dump <- function(X, name) {
  mod <- mirt(X, 1, itemtype = "Rasch", verbose = FALSE, TOL = 1e-6,
              technical = list(NCYCLES = 5000))
  cf <- coef(mod, simplify = TRUE)
  it <- as.data.frame(cf$items)
  write.csv(num17(data.frame(loglik = extract.mirt(mod, "logLik"), variance = cf$cov[1, 1],
                             n_iter = extract.mirt(mod, "iterations"))),
            paste0(name, "_pcm_fit.csv"), row.names = FALSE, quote = FALSE)
  write.csv(num17(cbind(data.frame(item_id = rownames(it)), it[, c("a1", "d1", "d2", "d3")])),
            paste0(name, "_pcm_items.csv"), row.names = FALSE, quote = FALSE)
  rows <- list()
  for (type in c("M2*", "C2")) {
    r <- tryCatch(M2(mod, type = type), error = function(e) conditionMessage(e))
    base <- data.frame(type = type, M2 = NA, df = NA, p = NA, RMSEA = NA, SRMSR = NA,
                       TLI = NA, CFI = NA, error = "")
    if (is.character(r)) base$error <- r else
      for (k in c("M2", "df", "p", "RMSEA", "SRMSR", "TLI", "CFI")) base[[k]] <- r[[k]]
    rows[[type]] <- base
  }
  m2 <- do.call(rbind, rows)
  write.csv(num17(m2), paste0(name, "_pcm_m2.csv"), row.names = FALSE, na = "")
  fi <- itemfit(mod)
  write.csv(num17(data.frame(item_id = fi$item, S_X2 = fi$S_X2, df_S_X2 = fi$df.S_X2,
                             RMSEA_S_X2 = fi$RMSEA.S_X2, p_S_X2 = fi$p.S_X2)),
            paste0(name, "_pcm_itemfit.csv"), row.names = FALSE, na = "")
  cat(name, "variance", cf$cov[1, 1], "logLik", extract.mirt(mod, "logLik"), "\n")
  print(m2); print(fi)
}
dump(read.csv("../mirt_poly/science.csv")[, -1], "science")
dump(read.csv("../mirt_groups/ordinal_responses.csv")[, -1], "ordinal")
cat("done\n")
