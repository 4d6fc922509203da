#!/usr/bin/env Rscript
# Reference model fit of mirt 1.45.1 for ATLAS's ordinal fit statistics
# (atlascat.irt.polyfitstats; tests/test_ordinal_fit.py). Run once, from this folder, after
# make_reference.R:
#   Rscript make_fit_reference.R
# Refits the fits make_reference.R wrote (the same data and calls: the same parameters, checked
# against <name>_items.csv) and writes, per fit:
#   <name>_m2.csv       M2(mod, type) for type M2* (mirt's default for polytomous items) and C2:
#                       M2, df, p, RMSEA, RMSEA_5, RMSEA_95, SRMSR, TLI, CFI, and the null
#                       model's M2 / df (computeNullModel, as M2 builds TLI / CFI); a statistic
#                       mirt refuses (too few df) has its message in `error`
#   <name>_itemfit.csv  itemfit(mod): S_X2, df.S_X2, RMSEA.S_X2, p.S_X2 (mincell = 1)
# plus sim_gpcm_items.csv: the GPCM fitted to sim_graded.csv (a second 20-item data set),
# sim_mixed.csv / sim_mixed_items.csv: sim_graded.csv with items 1-8 recoded to 3 categories
# (0-1 -> 0, 2 -> 1, 3-4 -> 2) and items 9-12 to 4 (0-1 -> 0), the graded model fitted, and
# <data>_null_items.csv: the null model's coefficients (a1 = 0, d1..; its EM stops at TOL 1e-4,
# so they are the observed category shares' logits only to ~1e-3).
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")

num17 <- function(df) {
  for (c in names(df)) if (is.numeric(df[[c]])) df[[c]] <- sprintf("%.17g", df[[c]])
  df
}

check_items <- function(mod, name) {
  ref <- read.csv(paste0(name, "_items.csv"))
  items <- coef(mod, simplify = TRUE)$items
  got <- items[, c("a1", setdiff(grep("^d[0-9]+$", colnames(items), value = TRUE), "d0"))]
  stopifnot(max(abs(as.matrix(ref[, -1]) - got), na.rm = TRUE) < 1e-12)
}

m2_rows <- function(mod) {
  rows <- list()
  for (type in c("M2*", "C2")) {
    r <- tryCatch(M2(mod, type = type), error = function(e) conditionMessage(e))
    null <- mirt:::computeNullModel(data = extract.mirt(mod, "data"), key = NULL)
    nf <- tryCatch(M2(null, calcNull = FALSE, type = type, quadpts = 2),
                   error = function(e) NULL)
    base <- data.frame(type = type, M2 = NA, df = NA, p = NA, RMSEA = NA, RMSEA_5 = NA,
                       RMSEA_95 = NA, SRMSR = NA, TLI = NA, CFI = NA,
                       M2_null = if (is.null(nf)) NA else nf$M2,
                       df_null = if (is.null(nf)) NA else nf$df, error = "")
    if (is.character(r)) {
      base$error <- r
    } else {
      for (k in c("M2", "df", "p", "RMSEA", "RMSEA_5", "RMSEA_95", "SRMSR", "TLI", "CFI"))
        if (!is.null(r[[k]])) base[[k]] <- r[[k]]
    }
    rows[[type]] <- base
  }
  do.call(rbind, rows)
}

dump_fit <- function(mod, name) {
  check_items(mod, name)
  m2 <- m2_rows(mod)
  write.csv(num17(m2), paste0(name, "_m2.csv"), row.names = FALSE, na = "")
  fi <- itemfit(mod)
  write.csv(num17(data.frame(item_id = fi$item, S_X2 = fi$S_X2, df_S_X2 = fi$df.S_X2,
                             RMSEA_S_X2 = fi$RMSEA.S_X2, p_S_X2 = fi$p.S_X2)),
            paste0(name, "_itemfit.csv"), row.names = FALSE, na = "")
  cat(name, "\n"); print(m2[, 1:10]); print(head(fi))
}

dump_null <- function(data, name) {
  null <- mirt:::computeNullModel(data = data, key = NULL)
  items <- coef(null, simplify = TRUE)$items
  it <- data.frame(item_id = rownames(items), a1 = items[, "a1"])
  for (d in grep("^d[0-9]+$", colnames(items), value = TRUE)) it[[d]] <- items[, d]
  write.csv(num17(it), paste0(name, "_null_items.csv"), row.names = FALSE)
}

sci <- read.csv("science.csv")[, -1]
dump_null(sci, "science")
for (type in c("graded", "gpcm"))
  dump_fit(mirt(sci, 1, itemtype = type, verbose = FALSE), paste0("science_", type))
sim <- read.csv("sim_graded.csv")[, -1]
dump_null(sim, "sim_graded")
dump_fit(mirt(sim, 1, itemtype = "graded", verbose = FALSE), "sim_graded")
gp <- mirt(sim, 1, itemtype = "gpcm", verbose = FALSE)
items <- coef(gp, simplify = TRUE)$items
it <- data.frame(item_id = rownames(items), a1 = items[, "a1"])
for (d in paste0("d", 1:4)) it[[d]] <- items[, d]
write.csv(it, "sim_gpcm_items.csv", row.names = FALSE)
dump_fit(gp, "sim_gpcm")

mixed <- sim
for (j in 1:8) mixed[, j] <- c(0, 0, 1, 2, 2)[sim[, j] + 1]
for (j in 9:12) mixed[, j] <- c(0, 0, 1, 2, 3)[sim[, j] + 1]
write.csv(cbind(subject_id = read.csv("sim_graded.csv")[, 1], mixed), "sim_mixed.csv",
          row.names = FALSE)
mm <- mirt(mixed, 1, itemtype = "graded", verbose = FALSE)
items <- coef(mm, simplify = TRUE)$items
it <- data.frame(item_id = rownames(items), a1 = items[, "a1"])
for (d in paste0("d", 1:4)) it[[d]] <- items[, d]
write.csv(it, "sim_mixed_items.csv", row.names = FALSE, na = "")
dump_fit(mm, "sim_mixed")
