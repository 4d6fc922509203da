# mirt's side of benchmarks/bench_multidim_se.py: mirt(dat, K) and mirt(dat, K, SE = TRUE)
# (SE.type "Oakes", its default for EM) on tests/data/oblimin/corr2f.csv: K = 2, 3 runs.
suppressPackageStartupMessages(library(mirt))
dat <- read.csv("tests/data/oblimin/corr2f.csv")[, -1]
for (k in c(2, 2, 2)) {
  t0 <- system.time(m0 <- mirt(dat, k, "2PL", verbose = FALSE))[["elapsed"]]
  t1 <- system.time(m1 <- mirt(dat, k, "2PL", SE = TRUE, verbose = FALSE))[["elapsed"]]
  cat(sprintf("K=%d: fit %.2f s, fit and SEs %.2f s (SE part ~%.2f s), %s, loglik %.3f\n", k, t0,
              t1, t1 - t0, m1@Options$SE.type, extract.mirt(m1, "logLik")))
}
