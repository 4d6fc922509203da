# Reference scores for tests/test_multidim_scores.py (mirt 1.45.1).
# Run from this folder: Rscript make_fixtures.R
# corr2f_bank.csv is ATLAS's bank (atlas calibrate ../oblimin/corr2f.csv --dims 2 -o
# corr2f_bank.csv: varimax loadings a1, a2 and d). mirt's parameters are fixed to it
# (pars = values with est = FALSE); such a model is not flagged exploratory, so fscores does not
# rotate: the scores are on the bank's axes with the prior N(0, I).
# fscores' default grid for 2 factors: 61 points per dimension on theta_lim = c(-6, 6).
suppressMessages(library(mirt))
dat <- read.csv("../oblimin/corr2f.csv"); y <- as.matrix(dat[, -1])
bk <- read.csv("corr2f_bank.csv")
fixed <- function(y, A, d, cov21 = 0) {
  sv <- mirt(y, 2, pars = "values")
  for (j in seq_len(nrow(bk))) {
    it <- sv$item == bk$item_id[j]
    sv$value[it & sv$name == "a1"] <- A[j, 1]
    sv$value[it & sv$name == "a2"] <- A[j, 2]
    sv$value[it & sv$name == "d"] <- d[j]
  }
  sv$value[sv$name == "COV_21"] <- cov21
  sv$est <- FALSE
  mirt(y, 2, pars = sv, TOL = NaN, verbose = FALSE)
}
A <- as.matrix(bk[, c("a1", "a2")])
out <- function(f, file, ids) {
  f <- as.data.frame(f); names(f) <- c("theta_1", "theta_2", "se_1", "se_2")
  write.csv(data.frame(subject_id = ids, f), file, row.names = FALSE)
}
mod <- fixed(y, A, bk$d)
stopifnot(!mod@Options$exploratory)
out(fscores(mod, method = "EAP", full.scores.SE = TRUE), "corr2f_eap.csv", dat$subject)
out(fscores(mod, method = "MAP", full.scores.SE = TRUE), "corr2f_map.csv", dat$subject)
# missing answers: every 7th cell (column-major) of the first 500 subjects set to NA, and all
# of subject 1's (mirt: NA scores; ATLAS: the prior, theta 0 and SE 1)
ym <- y[1:500, ]; ym[seq(1, length(ym), by = 7)] <- NA; ym[1, ] <- NA
modm <- fixed(ym, A, bk$d)
write.csv(data.frame(subject = dat$subject[1:500], ym), "corr2f_missing.csv", row.names = FALSE)
out(fscores(modm, method = "EAP", full.scores.SE = TRUE), "corr2f_missing_eap.csv", dat$subject[1:500])
out(fscores(modm, method = "MAP", full.scores.SE = TRUE), "corr2f_missing_map.csv", dat$subject[1:500])
# oblimin axes: mirt's summary rotation (mirt:::Rotate, GPArotation's quartimin) of the bank's
# standardized loadings F; the rotated slopes are 1.702 F* / sqrt(1 - h2) (mirt 1.45.1's
# exploratory fscores omits the 1.702, mirt issue #280: not compared) and the prior N(0, Phi)
F <- A / 1.702 / sqrt(1 + rowSums(A^2) / 1.702^2); h2 <- rowSums(F^2)
r <- mirt:::Rotate(F, "oblimin")
Fr <- r$loadings; Phi <- r$Phi
s <- sign(apply(Fr, 2, function(x) x[which.max(abs(x))]))          # as summary(): signs
Fr <- sweep(Fr, 2, s, "*"); Phi <- Phi * outer(s, s)
modr <- fixed(y, 1.702 * Fr / sqrt(1 - h2), bk$d, Phi[1, 2])
out(fscores(modr, method = "EAP", full.scores.SE = TRUE), "corr2f_oblimin_eap.csv", dat$subject)
write.csv(data.frame(phi12 = Phi[1, 2]), "corr2f_oblimin_phi.csv", row.names = FALSE)
