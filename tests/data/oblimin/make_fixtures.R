# Reference values for tests/test_rotation.py (mirt 1.45.1, GPArotation 2022.10.2).
# Run: Rscript make_fixtures.R OUTDIR   (OUTDIR defaults to the current folder)
# mirt's summary(mod, rotate = R) calls mirt:::Rotate(F, R): GPArotation's oblimin (gam = 0,
# quartimin) or geominQ (delta = 0.01) with normalize = FALSE, eps = 1e-5, maxit = 1000, one
# start at the identity, on the standardized loadings F; then each factor's sign is set so its
# largest |loading| is positive (Phi flipped to match).
suppressMessages(library(mirt))
args <- commandArgs(TRUE); out <- if (length(args)) args[1] else "."
set.seed(20261130)
J <- 12; N <- 2000
a <- matrix(0, J, 2)
a[1:6, 1] <- c(1.6, 1.3, 1.1, 1.8, 0.9, 1.4)
a[7:12, 2] <- c(1.5, 1.2, 1.7, 1.0, 1.3, 0.9)
a[c(2, 5), 2] <- c(0.6, 0.4); a[c(9, 11), 1] <- c(0.5, 0.7)       # cross-loadings
d <- seq(-1.2, 1.2, length.out = J)
rho <- 0.5                                                          # correlated factors
theta <- matrix(rnorm(N * 2), N, 2) %*% chol(matrix(c(1, rho, rho, 1), 2))
p <- plogis(theta %*% t(a) + matrix(d, N, J, byrow = TRUE))
y <- (matrix(runif(N * J), N, J) < p) * 1L
colnames(y) <- sprintf("i%02d", 1:J)
write.csv(data.frame(subject = sprintf("s%04d", 1:N), y), file.path(out, "corr2f.csv"), row.names = FALSE)
write.csv(data.frame(item_id = colnames(y), a1 = a[, 1], a2 = a[, 2], d = d),
          file.path(out, "corr2f_true.csv"), row.names = FALSE)
m2 <- mirt(y, 2, itemtype = "2PL", verbose = FALSE, TOL = 1e-5)
cf <- coef(m2, simplify = TRUE)$items
sn <- summary(m2, rotate = "none", verbose = FALSE)
so <- summary(m2, rotate = "oblimin", verbose = FALSE)
sg <- summary(m2, rotate = "geominQ", verbose = FALSE)
sb <- summary(m2, rotate = "oblimin", gam = 0.5, verbose = FALSE)
sv <- summary(m2, rotate = "varimax", verbose = FALSE)
write.csv(data.frame(item_id = colnames(y), a1 = cf[, "a1"], a2 = cf[, "a2"], d = cf[, "d"],
                     F1 = sn$rotF[, 1], F2 = sn$rotF[, 2], h2 = sn$h2[, 1],
                     oblimin1 = so$rotF[, 1], oblimin2 = so$rotF[, 2],
                     geomin1 = sg$rotF[, 1], geomin2 = sg$rotF[, 2],
                     biquartimin1 = sb$rotF[, 1], biquartimin2 = sb$rotF[, 2],
                     varimax1 = sv$rotF[, 1], varimax2 = sv$rotF[, 2]),
          file.path(out, "corr2f_mirt_loadings.csv"), row.names = FALSE)
write.csv(data.frame(rotation = c("oblimin", "geomin", "biquartimin", "varimax"),
                     phi12 = c(so$fcor[1, 2], sg$fcor[1, 2], sb$fcor[1, 2], sv$fcor[1, 2]),
                     logLik = extract.mirt(m2, "logLik")),
          file.path(out, "corr2f_mirt_phi.csv"), row.names = FALSE)
# three factors, rotation only: mirt's Rotate on a fixed unrotated loading matrix
set.seed(7)
L3 <- matrix(runif(15 * 3, 0, 0.15), 15, 3)
L3[1:5, 1] <- runif(5, 0.5, 0.8); L3[6:10, 2] <- runif(5, 0.5, 0.8); L3[11:15, 3] <- runif(5, 0.5, 0.8)
Q <- qr.Q(qr(matrix(rnorm(9), 3)))                                 # hide the structure
F3 <- L3 %*% Q
r3 <- list(oblimin = mirt:::Rotate(F3, "oblimin"), geomin = mirt:::Rotate(F3, "geominQ"))
write.csv(data.frame(F3, r3$oblimin$loadings, r3$geomin$loadings,
                     row.names = NULL) |> setNames(c(paste0("F", 1:3), paste0("oblimin", 1:3), paste0("geomin", 1:3))),
          file.path(out, "three_mirt_loadings.csv"), row.names = FALSE)
write.csv(data.frame(rotation = rep(c("oblimin", "geomin"), each = 3), row = rep(1:3, 2),
                     rbind(r3$oblimin$Phi, r3$geomin$Phi)) |> setNames(c("rotation", "row", paste0("phi", 1:3))),
          file.path(out, "three_mirt_phi.csv"), row.names = FALSE)
