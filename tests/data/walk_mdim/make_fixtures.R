# Reference values for tests/test_walk_mdim.py (mirt 1.45.1). Run: Rscript make_fixtures.R OUTDIR
suppressMessages(library(mirt))
args <- commandArgs(TRUE); out <- if (length(args)) args[1] else "."
set.seed(20261129)
J <- 20; N <- 1000
a <- matrix(0, J, 2)
a[1:10, 1] <- seq(0.9, 2.0, length.out = 10)
a[11:20, 2] <- seq(2.0, 0.9, length.out = 10)
a[c(3, 8), 2] <- c(0.7, 0.6); a[c(13, 17), 1] <- c(0.8, 0.6)   # cross-loadings
d <- seq(-1.5, 1.5, length.out = J)
theta <- matrix(rnorm(N * 2), N, 2)
p <- plogis(theta %*% t(a) + matrix(d, N, J, byrow = TRUE))
y <- (matrix(runif(N * J), N, J) < p) * 1L
colnames(y) <- sprintf("i%02d", 1:J)
write.csv(data.frame(subject = sprintf("s%04d", 1:N), y), file.path(out, "twofactor.csv"), row.names = FALSE)
write.csv(data.frame(item_id = colnames(y), a1 = a[, 1], a2 = a[, 2], d = d), file.path(out, "twofactor_true.csv"), row.names = FALSE)
summ <- function(tag, dat) {
  m1 <- mirt(dat, 1, verbose = FALSE, TOL = 1e-5)
  m2 <- mirt(dat, 2, verbose = FALSE, TOL = 1e-5)
  av <- anova(m1, m2)
  sv <- summary(m2, rotate = "varimax", verbose = FALSE)
  so <- summary(m2, rotate = "oblimin", verbose = FALSE)
  cf <- coef(m2, simplify = TRUE)$items
  write.csv(data.frame(item_id = colnames(dat), a1 = cf[, "a1"], a2 = cf[, "a2"], d = cf[, "d"],
                       f1_varimax = sv$rotF[, 1], f2_varimax = sv$rotF[, 2], h2 = sv$h2,
                       f1_oblimin = so$rotF[, 1], f2_oblimin = so$rotF[, 2]),
            file.path(out, paste0(tag, "_mirt_items.csv")), row.names = FALSE)
  write.csv(data.frame(model = c("1F", "2F"), logLik = c(extract.mirt(m1, "logLik"), extract.mirt(m2, "logLik")),
                       AIC = av$AIC, BIC = av$BIC, df = c(extract.mirt(m1, "nest"), extract.mirt(m2, "nest")),
                       X2 = c(NA, av$X2[2]), p = c(NA, av$p[2]), oblimin_phi12 = c(NA, so$fcor[1, 2])),
            file.path(out, paste0(tag, "_mirt_fit.csv")), row.names = FALSE)
  t <- sapply(1:3, function(i) system.time(mirt(dat, 2, verbose = FALSE, TOL = 1e-5))[["elapsed"]])
  cat(tag, "mirt(data, 2) seconds, median of 3:", median(t), "\n")
}
summ("twofactor", y)
lsat <- expand.table(LSAT7); colnames(lsat) <- sprintf("item%d", 1:5)
write.csv(data.frame(subject = sprintf("s%04d", seq_len(nrow(lsat))), lsat), file.path(out, "lsat7.csv"), row.names = FALSE)
summ("lsat7", lsat)
