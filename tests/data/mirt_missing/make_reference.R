#!/usr/bin/env Rscript
# Reference M2 of mirt 1.45.1 on data with missing answers, for ATLAS's M2 (pairwise available
# moments, as mirt's M2) and S-X2 (rows with every answer, as mirt's itemfit(mod, na.rm = TRUE));
# tests/test_fit_missing.py. Run once, from this folder:
#   Rscript make_reference.R
# Writes, per fit <name>:
#   <name>.csv          the data (subject_id, items; blank = missing)
#   <name>_items.csv    coef(mod, simplify = TRUE)$items, 17 digits (binary: X,a1,d,g,u;
#                       ordinal: item_id,model,a1,d1..,levels)
#   <name>_m2.csv       M2(mod) (binary: M2; ordinal: M2* where it has df) and M2(mod, type = "C2")
#                       for ordinal banks: type,M2,df,p,RMSEA,RMSEA_5,RMSEA_95,SRMSR,TLI,CFI
#   <name>_itemfit.csv  binary only: itemfit(mod, na.rm = TRUE)
# Data: bin2pl (500 x 12 2PL, 10% of the answers missing at random), graded (600 x 12, five
# categories, 8% missing) and mirt's Science with 60 ratings removed, fitted graded and gpcm.
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")

num17 <- function(df) {
  for (c in names(df)) if (is.numeric(df[[c]])) df[[c]] <- sprintf("%.17g", df[[c]])
  df
}
write_data <- function(X, name) {
  write.csv(cbind(data.frame(subject_id = sprintf("s%d", seq_len(nrow(X)))), X),
            paste0(name, ".csv"), row.names = FALSE, na = "")
}
m2_row <- function(mod, type) {
  r <- M2(mod, type = type)
  cbind(data.frame(type = type), r[, c("M2", "df", "p", "RMSEA", "RMSEA_5", "RMSEA_95",
                                       "SRMSR", "TLI", "CFI")])
}

set.seed(20261128)
a <- matrix(rlnorm(12, 0.2, 0.3)); d <- matrix(rnorm(12))
X <- simdata(a, d, 500, itemtype = "2PL"); colnames(X) <- sprintf("Item_%d", 1:12)
X[sample(length(X), round(0.10 * length(X)))] <- NA
write_data(X, "bin2pl")
mod <- mirt(X, 1, "2PL", verbose = FALSE)
cf <- coef(mod, simplify = TRUE)$items
write.csv(num17(data.frame(X = rownames(cf), a1 = cf[, "a1"], d = cf[, "d"], g = 0, u = 1)),
          "bin2pl_items.csv", row.names = FALSE, quote = FALSE)
write.csv(num17(m2_row(mod, "M2*")), "bin2pl_m2.csv", row.names = FALSE, quote = FALSE)
fit <- itemfit(mod, na.rm = TRUE)
write.csv(num17(data.frame(item_id = fit$item, S_X2 = fit$S_X2, df_S_X2 = fit$df.S_X2,
                           RMSEA_S_X2 = fit$RMSEA.S_X2, p_S_X2 = fit$p.S_X2)),
          "bin2pl_itemfit.csv", row.names = FALSE, quote = FALSE)

ordinal <- function(X, itemtype, name, types) {
  mod <- mirt(X, 1, itemtype, verbose = FALSE)
  cf <- coef(mod, simplify = TRUE)$items
  dn <- setdiff(grep("^d[0-9]", colnames(cf), value = TRUE), "d0")
  lev <- sapply(seq_len(ncol(X)), function(j) paste(sort(unique(na.omit(X[, j]))), collapse = ";"))
  write.csv(num17(data.frame(item_id = rownames(cf), model = itemtype, a1 = cf[, "a1"],
                             cf[, dn, drop = FALSE], levels = lev)),
            paste0(name, "_items.csv"), row.names = FALSE, quote = FALSE)
  write.csv(num17(do.call(rbind, lapply(types, function(t) m2_row(mod, t)))),
            paste0(name, "_m2.csv"), row.names = FALSE, quote = FALSE)
}
a <- matrix(rlnorm(12, 0.2, 0.3))
d <- t(apply(matrix(rnorm(12 * 4), 12), 1, sort, decreasing = TRUE))
G <- simdata(a, d, 600, itemtype = "graded"); colnames(G) <- sprintf("Item_%d", 1:12)
G[sample(length(G), round(0.08 * length(G)))] <- NA
write_data(G, "graded")
ordinal(G, "graded", "graded", c("M2*", "C2"))
S <- as.matrix(Science)
S[sample(length(S), 60)] <- NA
write_data(S, "science")
ordinal(S, "graded", "science_graded", "C2")
ordinal(S, "gpcm", "science_gpcm", "C2")
