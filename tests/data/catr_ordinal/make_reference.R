# catR::thetaEst / semTheta (EAP, BM = MAP, ML, WL = WLE) after every step of fixed item
# sequences on ordinal banks: model "GRM" (15 items, 5 categories, catR's (alpha, beta1..4))
# and "GPCM" (15 items, 4 categories, (alpha, delta1..3)), 8 subjects each, 12 items in a
# random order; subject 0 answers the lowest category throughout, subject 1 the highest, the
# others draw from the model (genPattern) at theta -2..2.5. catR defaults: D = 1, N(0, 1) prior,
# range = c(-4, 4), EAP on parInt = c(-4, 4, 33); SE classic: BM 1 / sqrt(I + 1), ML and WL
# 1 / sqrt(I), EAP the posterior SD. *_tight: catR's root of its own estimating function
# (dl + f0 of thetaEst, with catR's Pi / Ii / Ji) refined to tol 1e-13, semTheta there.
# Run from this folder: Rscript make_reference.R
suppressPackageStartupMessages(library(catR))
set.seed(20261129)
grm <- cbind(rlnorm(15, 0.2, 0.3), t(apply(matrix(rnorm(60, 0, 1.2), 15), 1, sort)))
gpcm <- cbind(rlnorm(15, 0.1, 0.3), matrix(rnorm(45, 0, 1), 15))
colnames(grm) <- c("alpha", paste0("beta", 1:4)); colnames(gpcm) <- c("alpha", paste0("delta", 1:3))
write.csv(grm, "grm_bank.csv", row.names = FALSE); write.csv(gpcm, "gpcm_bank.csv", row.names = FALSE)
g <- function(th, it, x, model, method) {   # thetaEst's optF for polytomous items
  p <- Pi(th, it, model = model); s <- 0
  for (i in seq_along(x)) s <- s + p$dPi[i, x[i] + 1] / p$Pi[i, x[i] + 1]
  switch(method, BM = s - th, ML = s,
         WL = s + sum(Ji(th, it, model = model)$Ji) / (2 * sum(Ii(th, it, model = model)$Ii)))
}
out <- NULL
thetas <- c(0, 0, -2, -1, 0, 1, 1.8, 2.5)
for (model in c("GRM", "GPCM")) {
  it <- if (model == "GRM") grm else gpcm
  top <- ncol(it) - 1
  for (i in 0:7) {
    items <- sample(15, 12)
    x_all <- switch(as.character(i), "0" = rep(0, 12), "1" = rep(top, 12),
                    genPattern(thetas[i + 1], it[items, ], model = model))
    for (k in seq_along(items)) {
      itk <- it[items[1:k], , drop = FALSE]; x <- x_all[1:k]
      for (m in c("EAP", "BM", "ML", "WL")) {
        th <- thetaEst(itk, x, model = model, method = m, range = c(-4, 4), parInt = c(-4, 4, 33))
        se <- semTheta(th, itk, x, model = model, method = m, parInt = c(-4, 4, 33))
        tt <- th
        if (m != "EAP" && abs(th) < 4) {
          f <- function(t) g(t, itk, x, model, m)
          lo <- th - 0.01; hi <- th + 0.01
          if (f(lo) * f(hi) < 0) tt <- uniroot(f, c(lo, hi), tol = 1e-13)$root
        }
        st <- if (m == "EAP") se else semTheta(tt, itk, x, model = model, method = m)
        out <- rbind(out, data.frame(model = model, subject = i, step = k, item = items[k] - 1,
                                     response = x[k], method = m, theta = th, se = se,
                                     theta_tight = tt, se_tight = st))
      }
    }
  }
}
num <- c("theta", "se", "theta_tight", "se_tight")
out[num] <- lapply(out[num], function(v) sprintf("%.17g", v))
write.csv(out, "reference.csv", row.names = FALSE, quote = FALSE)
