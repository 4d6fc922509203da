#!/usr/bin/env Rscript
# Reference standard errors of mirt 1.45.1's exploratory multidimensional 2PL for
# tests/test_multidim_se.py. Run once from this folder:  Rscript make_reference.R
# (Rscript make_reference.R two / three: one of the two fits)
# Writes, per fit: <name>_data.csv (the seeded simulated 0/1 answers), <name>_items.csv (item,
# parameter, value, se: coef(mod, printSE = TRUE), unrotated; the loadings mirt fixes at 0 to
# identify the rotation, a2 of the last item for K = 2, have se NA) and <name>_fit.json (logLik, SE.type, the fit's settings);
# make_reference.log is this script's output.
suppressPackageStartupMessages(library(mirt))
options(digits = 15)

simulate <- function(n, J, K, seed) {
  set.seed(seed)
  A <- matrix(0, J, K)
  per <- ceiling(J / K)
  for (j in 1:J) {            # simple structure plus small cross-loadings
    f <- min(K, (j - 1) %/% per + 1)
    A[j, ] <- runif(K, 0, 0.4)
    A[j, f] <- runif(1, 0.9, 2.0)
  }
  d <- rnorm(J, 0, 1)
  theta <- matrix(rnorm(n * K), n, K)
  P <- plogis(theta %*% t(A) + matrix(d, n, J, byrow = TRUE))
  dat <- (matrix(runif(n * J), n, J) < P) * 1
  colnames(dat) <- paste0("item", 1:J)
  dat
}

dump_fit <- function(dat, K, name, tol) {
  write.csv(dat, paste0(name, "_data.csv"), row.names = FALSE)
  t0 <- proc.time()[["elapsed"]]
  mod <- mirt(dat, K, "2PL", SE = TRUE, SE.type = "Oakes", verbose = FALSE, TOL = tol,
              technical = list(NCYCLES = 20000))
  secs <- proc.time()[["elapsed"]] - t0
  cf <- coef(mod, printSE = TRUE)
  rows <- list()
  for (it in names(cf)) {
    if (it == "GroupPars") next
    m <- cf[[it]]
    for (p in colnames(m)) {
      if (p %in% c("g", "u")) next
      se <- if ("SE" %in% rownames(m)) m["SE", p] else NA
      rows[[length(rows) + 1]] <- data.frame(item = it, parameter = p, value = m["par", p], se = se)
    }
  }
  write.csv(do.call(rbind, rows), paste0(name, "_items.csv"), row.names = FALSE)
  fit <- list(loglik = extract.mirt(mod, "logLik"), n_parameters = extract.mirt(mod, "nest"),
              SE_type = mod@Options$SE.type, n = nrow(dat), n_dims = K,
              quadpts = mod@Options$quadpts, tol = tol,
              converged = extract.mirt(mod, "converged"), iterations = extract.mirt(mod, "iterations"),
              seconds = secs, mirt = as.character(packageVersion("mirt")))
  writeLines(jsonlite::toJSON(fit, auto_unbox = TRUE, digits = NA), paste0(name, "_fit.json"))
  cat(name, ": logLik", fit$loglik, "converged", fit$converged, "SE.type", fit$SE_type,
      "quadpts", fit$quadpts, "seconds", secs, "\n")
  mod
}

cat("mirt's SE.type default (EM):", formals(mirt)$SE.type, "\n")
# the two-factor fit to its maximum (ATLAS's own fit is compared with it); the three-factor one
# at TOL 1e-5 (its SEs are compared at mirt's own estimates; the tight fit takes many minutes)
args <- commandArgs(trailingOnly = TRUE)
if (!("three" %in% args)) m2 <- dump_fit(simulate(1500, 10, 2, 20261129), 2, "twofactor", 1e-7)
if (!("two" %in% args)) m3 <- dump_fit(simulate(1500, 12, 3, 20261130), 3, "threefactor", 1e-5)
