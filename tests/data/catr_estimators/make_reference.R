# catR::thetaEst / semTheta of the four estimators (EAP, BM = MAP, ML, WL = WLE) after every step
# of a fixed item sequence: the 4PL bank and answers of ../catr_4pl (subjects s0 all right, s1 all
# wrong) and each subject's first 20 items there (catR's EAP test, randomcat.csv).
# catR defaults: D = 1, N(0, 1) prior, range = c(-4, 4) for BM / ML / WL, EAP on parInt =
# c(-4, 4, 33); SE classic: BM 1 / sqrt(I + 1), ML and WL 1 / sqrt(I), EAP the posterior SD.
# thetaEst solves with uniroot's default tol (.Machine$double.eps^0.25, ~1.2e-4 in theta); the
# columns *_tight refine catR's root of the same estimating function (catR's Pi / Ii / Ji) with
# tol = 1e-13 and take semTheta there. Run from this folder: Rscript make_reference.R
suppressPackageStartupMessages(library(catR))
b <- read.csv("../catr_4pl/bank.csv"); it <- as.matrix(b[, c("a", "b", "c", "u")])
Y <- as.matrix(read.csv("../catr_4pl/responses.csv")[, -1])
seqs <- read.csv("../catr_4pl/randomcat.csv")
g <- function(th, it, x, method) {       # catR's estimating function (thetaEst's T)
  it <- rbind(it); p <- Pi(th, it); P <- p$Pi
  s <- sum(p$dPi * (x - P) / (P * (1 - P)))
  switch(method, BM = s - th, ML = s, WL = s + sum(Ji(th, it)$Ji) / (2 * sum(Ii(th, it)$Ii)))
}
out <- NULL
for (i in 0:11) {
  items <- seqs$item[seqs$subject == i] + 1
  for (k in seq_along(items)) {
    sel <- items[1:k]; x <- Y[i + 1, sel]; itk <- it[sel, , drop = FALSE]
    for (m in c("EAP", "BM", "ML", "WL")) {
      th <- thetaEst(itk, x, method = m, range = c(-4, 4), parInt = c(-4, 4, 33))
      se <- semTheta(th, itk, x, method = m, parInt = c(-4, 4, 33))
      tt <- th
      if (m != "EAP" && abs(th) < 4) {
        f <- function(t) g(t, itk, x, m)
        lo <- th - 0.01; hi <- th + 0.01
        if (f(lo) * f(hi) < 0) tt <- uniroot(f, c(lo, hi), tol = 1e-13)$root
      }
      st <- if (m == "EAP") se else semTheta(tt, itk, x, method = m)
      out <- rbind(out, data.frame(subject = i, step = k, item = sel[k] - 1, response = x[k],
                                   method = m, theta = th, se = se, theta_tight = tt, se_tight = st))
    }
  }
}
num <- c("theta", "se", "theta_tight", "se_tight")
out[num] <- lapply(out[num], function(v) sprintf("%.17g", v))
write.csv(out, "reference.csv", row.names = FALSE, quote = FALSE)
