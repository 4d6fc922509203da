# Independent linking constants for graded banks (Kim & Lee 2006; Kolen & Brennan 2014, 6.8),
# written without equateIRT/plink: banks in atlas's "ours" form (item_id, model, a, b1.., levels),
# mean-mean / mean-sigma on every anchor threshold, Haebara (squared category-probability gaps)
# and Stocking-Lord (expected levels summed over anchors) by optim on 61 nodes on [-4, 4] with
# normalized N(0, 1) weights on the reference scale.
# Usage: Rscript link_reference_graded.R REF.csv NEW.csv OUT.csv
args <- commandArgs(TRUE)
ref <- read.csv(args[1], colClasses = c(item_id = "character", levels = "character"))
new <- read.csv(args[2], colClasses = c(item_id = "character", levels = "character"))
common <- intersect(ref$item_id, new$item_id)
r <- ref[match(common, ref$item_id), ]; n <- new[match(common, new$item_id), ]
bcols <- grep("^b[0-9]+$", names(ref), value = TRUE)
x <- seq(-4, 4, length.out = 61); w <- dnorm(x); w <- w / sum(w)
thr <- function(bank, j) { v <- unlist(bank[j, bcols]); v[!is.na(v)] }
lev <- function(bank, j) as.numeric(strsplit(bank$levels[j], ";")[[1]])
cats <- function(a, b) {           # (q, K) category probabilities of one graded item
  ps <- cbind(1, sapply(b, function(bk) 1 / (1 + exp(-a * (x - bk)))), 0)
  ps[, -ncol(ps), drop = FALSE] - ps[, -1, drop = FALSE]
}
pr <- lapply(seq_along(common), function(j) cats(r$a[j], thr(r, j)))
crit <- function(v, kind) {
  A <- v[1]; B <- v[2]; tot <- 0; er <- 0; en <- 0
  for (j in seq_along(common)) {
    pn <- cats(n$a[j] / A, A * thr(n, j) + B)
    if (kind == "haebara") tot <- tot + sum(w * rowSums((pr[[j]] - pn)^2))
    er <- er + pr[[j]] %*% lev(r, j); en <- en + pn %*% lev(n, j)
  }
  if (kind == "haebara") tot else sum(w * (er - en)^2)
}
br <- unlist(lapply(seq_along(common), function(j) thr(r, j)))
bn <- unlist(lapply(seq_along(common), function(j) thr(n, j)))
sdp <- function(v) sqrt(mean((v - mean(v))^2))
A_ms <- sdp(br) / sdp(bn); B_ms <- mean(br) - A_ms * mean(bn)
A_mm <- mean(n$a) / mean(r$a); B_mm <- mean(br) - A_mm * mean(bn)
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
