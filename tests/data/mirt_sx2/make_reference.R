#!/usr/bin/env Rscript
# Reference S-X2 item fit of mirt 1.45.1 for ATLAS's binary S-X2 (atlascat.irt.fit.sx2;
# tests/test_sx2_parity.py). Run once, from this folder:
#   Rscript make_reference.R
# Writes, per fit <name>:
#   <name>_items.csv    coef(mod, simplify = TRUE)$items in mirt's form (X, a1, d, g, u), 17 digits
#   <name>_itemfit.csv  itemfit(mod) (mincell = 1): item_id, S_X2, df_S_X2, RMSEA_S_X2, p_S_X2
#   <name>_group.csv    the latent mean and variance (MEAN_1, COV_11)
# and the data: lsat7.csv / lsat6.csv (mirt's LSAT7 / LSAT6 response patterns with freq),
# sim2pl.csv (1000 x 20, 2PL), sim3pl.csv (2000 x 15, 3PL), sparse2pl.csv (250 x 30, 2PL:
# many score groups with one or two subjects, where the collapsing rules matter).
# Fits: lsat7_2pl, lsat6_rasch (itemtype Rasch: a1 = 1, the latent variance estimated),
# lsat6_1pl (one slope for all items, CONSTRAIN),
# sim2pl_2pl, sim3pl_3pl, sparse2pl_2pl, and sparse2pl_2pl_mincell5 (itemfit(mod, mincell = 5)).
suppressPackageStartupMessages(library(mirt))
stopifnot(as.character(packageVersion("mirt")) == "1.45.1")

num17 <- function(df) {
  for (c in names(df)) if (is.numeric(df[[c]])) df[[c]] <- sprintf("%.17g", df[[c]])
  df
}

write_patterns <- function(tab, name) {
  full <- expand.table(tab)
  d <- as.data.frame(tab)
  names(d) <- c(colnames(full), "freq")
  write.csv(d, paste0(name, ".csv"), row.names = FALSE)
  full
}

write_data <- function(dat, name) {
  colnames(dat) <- sprintf("Item_%d", seq_len(ncol(dat)))
  write.csv(cbind(data.frame(subject_id = sprintf("s%d", seq_len(nrow(dat)))), dat),
            paste0(name, ".csv"), row.names = FALSE)
  dat
}

dump_fit <- function(mod, name, mincell = 1) {
  items <- coef(mod, simplify = TRUE)$items
  it <- data.frame(X = rownames(items), a1 = items[, "a1"], d = items[, "d"],
                   g = items[, "g"], u = items[, "u"])
  write.csv(num17(it), paste0(name, "_items.csv"), row.names = FALSE)
  gp <- coef(mod, simplify = TRUE)
  write.csv(num17(data.frame(MEAN_1 = gp$means[1], COV_11 = gp$cov[1, 1])),
            paste0(name, "_group.csv"), row.names = FALSE)
  fi <- itemfit(mod, mincell = mincell)
  write.csv(num17(data.frame(item_id = fi$item, S_X2 = fi$S_X2, df_S_X2 = fi$df.S_X2,
                             RMSEA_S_X2 = fi$RMSEA.S_X2, p_S_X2 = fi$p.S_X2)),
            paste0(name, "_itemfit.csv"), row.names = FALSE, na = "")
  cat(name, "\n"); print(fi)
}

lsat7 <- write_patterns(LSAT7, "lsat7")
dump_fit(mirt(lsat7, 1, itemtype = "2PL", verbose = FALSE), "lsat7_2pl")
lsat6 <- write_patterns(LSAT6, "lsat6")
dump_fit(mirt(lsat6, 1, itemtype = "Rasch", verbose = FALSE), "lsat6_rasch")
# the 1PL as a common slope (mirt counts the constrained slope as a parameter of every item)
dump_fit(mirt(lsat6, mirt.model("F = 1-5\nCONSTRAIN = (1-5, a1)"), verbose = FALSE),
         "lsat6_1pl")

set.seed(20261128)
a <- matrix(rlnorm(20, 0.2, 0.3)); d <- matrix(rnorm(20))
sim2 <- write_data(simdata(a, d, 1000, itemtype = "2PL"), "sim2pl")
dump_fit(mirt(sim2, 1, itemtype = "2PL", verbose = FALSE), "sim2pl_2pl")

a <- matrix(rlnorm(15, 0.3, 0.25)); d <- matrix(rnorm(15)); g <- matrix(runif(15, 0.1, 0.25))
sim3 <- write_data(simdata(a, d, 2000, itemtype = "3PL", guess = g), "sim3pl")
dump_fit(mirt(sim3, 1, itemtype = "3PL", verbose = FALSE), "sim3pl_3pl")

a <- matrix(rlnorm(30, 0.2, 0.3)); d <- matrix(rnorm(30))
sparse <- write_data(simdata(a, d, 250, itemtype = "2PL"), "sparse2pl")
mod <- mirt(sparse, 1, itemtype = "2PL", verbose = FALSE)
dump_fit(mod, "sparse2pl_2pl")
dump_fit(mod, "sparse2pl_2pl_mincell5", mincell = 5)
