# One against two exploratory factors in mirt on four tiny_ matrices, beside the check of
# benchmarks/bench_dimensionality.py (benchmarks/results/dimensionality.md). Run: Rscript
# benchmarks/dimensionality_mirt.R from the checkout (about 10 minutes on 2 cores).
suppressMessages(library(mirt))
set.seed(1)
for (f in c("tiny_winogrande", "tiny_arc", "tiny_gsm8k", "tiny_truthfulqa")) {
  x <- read.csv(gzfile(file.path("..", "shared", "data", "openllm", paste0(f, ".csv.gz"))),
                row.names = 1)
  x <- x[sample(nrow(x), 1500), ]
  x <- x[, apply(x, 2, function(c) length(unique(c)) > 1)]
  t0 <- Sys.time()
  m1 <- mirt(x, 1, itemtype = "2PL", verbose = FALSE)
  m2 <- mirt(x, 2, itemtype = "2PL", verbose = FALSE)
  s <- summary(m2, rotate = "oblimin", verbose = FALSE)
  ss <- colSums(s$rotF^2)
  cat(sprintf("%s 1500 x %d: BIC 1 factor %.0f, 2 factors %.0f; oblimin factor correlation %.2f; SS loadings %.1f, %.1f (%.0f s)\n",
              f, ncol(x), extract.mirt(m1, "BIC"), extract.mirt(m2, "BIC"), s$fcor[1, 2], ss[1], ss[2],
              as.numeric(difftime(Sys.time(), t0, units = "secs"))))
}
