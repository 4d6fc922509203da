#!/usr/bin/env Rscript
# Reference fits with mirt for tests/data/mirt_*.csv (issue 13, item 6). Development only: needs R
# with mirt 1.45.1 (bash ../shared/tools/install-mirt.sh); never run by the tests or CI.
#
#   Rscript benchmarks/mirt_reference.R INPUT.csv[.gz] ITEMTYPE OUT.csv [freq=COL] [prior_a=MU,SD]
#           [prior_c=ALPHA,BETA] [m2=1] [tol=1e-4]
#
# INPUT: first column = subject id (or, with freq=COL, a pattern table with a frequency column),
# other columns 0/1 (NA allowed). prior_a = lognormal(MU, SD) on a1 (mirt 'lnorm'), prior_c =
# beta(ALPHA, BETA) on g (mirt 'expbeta'): densities of the natural parameters, as in atlascat.
# OUT: item_id,a1,d,g,u plus one row item_id="_summary" whose a1 = logLik, d = latent variance,
# g = iterations, u = M2 (NA unless m2=1).
suppressPackageStartupMessages(library(mirt))
args <- commandArgs(trailingOnly = TRUE)
infile <- args[1]; itemtype <- args[2]; out <- args[3]
opt <- list(freq = NA, prior_a = NA, prior_c = NA, m2 = "0", tol = NA)
for (kv in args[-(1:3)]) {
  p <- strsplit(kv, "=", fixed = TRUE)[[1]]
  opt[[p[1]]] <- p[2]
}
df <- read.csv(infile, check.names = FALSE, stringsAsFactors = FALSE)
if (!is.na(opt$freq)) {
  f <- df[[opt$freq]]
  Y <- as.matrix(df[, setdiff(names(df), opt$freq), drop = FALSE])
  Y <- Y[rep(seq_len(nrow(Y)), f), , drop = FALSE]
} else {
  Y <- as.matrix(df[, -1, drop = FALSE])
}
storage.mode(Y) <- "integer"
ncat <- apply(Y, 2, function(x) length(unique(x[!is.na(x)])))
Y <- Y[, ncat >= 2, drop = FALSE]
J <- ncol(Y)
spec <- sprintf("F = 1-%d", J)
pri <- character(0)
if (!is.na(opt$prior_a)) {
  v <- strsplit(opt$prior_a, ",")[[1]]
  pri <- c(pri, sprintf("(1-%d, a1, lnorm, %s, %s)", J, v[1], v[2]))
}
if (!is.na(opt$prior_c)) {
  v <- strsplit(opt$prior_c, ",")[[1]]
  pri <- c(pri, sprintf("(1-%d, g, expbeta, %s, %s)", J, v[1], v[2]))
}
if (length(pri)) spec <- paste0(spec, "\nPRIOR = ", paste(pri, collapse = ", "))
model <- mirt.model(spec)
fitargs <- list(data = Y, model = model, itemtype = itemtype, verbose = FALSE,
                technical = list(NCYCLES = 2000))
if (!is.na(opt$tol)) fitargs$TOL <- as.numeric(opt$tol)
t <- system.time(m <- do.call(mirt, fitargs))[["elapsed"]]
cf <- coef(m, simplify = TRUE)
it <- cf$items
res <- data.frame(item_id = rownames(it), a1 = it[, "a1"], d = it[, "d"],
                  g = if ("g" %in% colnames(it)) it[, "g"] else 0,
                  u = if ("u" %in% colnames(it)) it[, "u"] else 1)
m2 <- NA
if (opt$m2 == "1") m2 <- M2(m)$M2
res <- rbind(res, data.frame(item_id = "_summary", a1 = extract.mirt(m, "logLik"),
                             d = unname(cf$cov[1, 1]), g = extract.mirt(m, "iterations"), u = m2))
write.csv(res, out, row.names = FALSE)
cat(sprintf("%s %s loglik %.4f iterations %d converged %s var %.4f M2 %s %.1f s\n", infile, itemtype,
            extract.mirt(m, "logLik"), extract.mirt(m, "iterations"),
            extract.mirt(m, "converged"), cf$cov[1, 1], format(m2, digits = 8), t))
