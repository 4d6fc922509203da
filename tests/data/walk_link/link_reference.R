# Independent linking constants (Kolen & Brennan 2014, ch. 6), written without equateIRT/plink
# (not installed offline): mean-mean, mean-sigma, and Haebara / Stocking-Lord minimized by
# optim (Nelder-Mead, then BFGS) on 61 equally spaced nodes on [-4, 4] with normalized N(0, 1)
# weights, on the reference scale, one-directional (the new bank moved onto the reference).
# Usage: Rscript link_reference.R REF.csv NEW.csv OUT.csv   (banks: item_id,a,b,c,u)
args <- commandArgs(TRUE)
ref <- read.csv(args[1], colClasses = c(item_id = "character"))
new <- read.csv(args[2], colClasses = c(item_id = "character"))
common <- intersect(ref$item_id, new$item_id)
r <- ref[match(common, ref$item_id), ]; n <- new[match(common, new$item_id), ]
x <- seq(-4, 4, length.out = 61); w <- dnorm(x); w <- w / sum(w)
icc <- function(a, b, c, u) sapply(seq_along(a), function(j) c[j] + (u[j] - c[j]) / (1 + exp(-a[j] * (x - b[j]))))
pr <- icc(r$a, r$b, r$c, r$u)
crit <- function(v, kind) {
  A <- v[1]; B <- v[2]
  pn <- icc(n$a / A, A * n$b + B, n$c, n$u)
  if (kind == "haebara") sum(w * rowSums((pr - pn)^2)) else sum(w * (rowSums(pr) - rowSums(pn))^2)
}
sdp <- function(v) sqrt(mean((v - mean(v))^2))
A_ms <- sdp(r$b) / sdp(n$b); B_ms <- mean(r$b) - A_ms * mean(n$b)
A_mm <- mean(n$a) / mean(r$a); B_mm <- mean(r$b) - A_mm * mean(n$b)
fitcc <- function(kind) {
  o <- optim(c(A_ms, B_ms), crit, kind = kind, control = list(reltol = 1e-14, maxit = 5000))
  o <- optim(o$par, crit, kind = kind, method = "BFGS", control = list(reltol = 1e-16, maxit = 5000))
  c(o$par, o$value)
}
hb <- fitcc("haebara"); sl <- fitcc("sl")
out <- data.frame(method = c("mean-mean", "mean-sigma", "haebara", "stocking-lord"),
                  A = c(A_mm, A_ms, hb[1], sl[1]), B = c(B_mm, B_ms, hb[2], sl[2]),
                  criterion = c(NA, NA, hb[3], sl[3]), n_anchors = length(common))
write.csv(out, args[3], row.names = FALSE)
print(out, digits = 10)
