# Reference ML and WLE scores for tests/test_multidim_mlwle.py (mirt 1.45.1).
# Run from this folder: Rscript make_ml_wle.R   (about a minute)
# fscores(mod, method = "ML" | "WLE", full.scores.SE = TRUE) with mirt's parameters fixed to an
# ATLAS bank (pars = values, est = FALSE: not exploratory, so no rotation; as make_fixtures.R):
# - K = 2: corr2f_bank.csv on ../oblimin/corr2f.csv (2000 subjects), on corr2f_missing.csv (500
#   subjects, every 7th cell missing, subject 1 nothing) and on extreme.csv (hand-made patterns:
#   all right / all wrong, with and without missing answers, one answer, a "separable" pattern
#   whose likelihood rises without bound along theta_1 - theta_2, no answer);
# - K = 3: threefactor_bank.csv (mirt's unrotated three-factor fit of
#   ../mirt_multidim_se/threefactor_data.csv, written here in ATLAS's bank format) on the first
#   300 subjects of that data with every 7th cell (column-major) missing.
# mirt's ML: nlm on -log L from the EAP (K < 3) or 0 (K = 3), theta bounded by max_theta = 20;
# all observed answers right: +Inf, all wrong: -Inf, SE NA; any SE > 30: that theta +-Inf, SE NA.
# Its SE: sqrt(diag(solve(nlm's Hessian))), the observed information (for the 2PL the expected
# one, sum_j p q a a^T). mirt's WLE: nlm on -(log L + log(det I(theta)) / 2), SE from the inverse
# of that objective's Hessian. Non-finite values are written as Inf / -Inf / NA.
suppressMessages(library(mirt))
options(digits = 15)
fixed <- function(y, bk) {
  K <- sum(grepl("^a[0-9]+$", names(bk)))
  sv <- mirt(y, K, pars = "values")
  for (j in seq_len(nrow(bk))) {
    it <- sv$item == colnames(y)[j]
    for (k in seq_len(K)) sv$value[it & sv$name == paste0("a", k)] <- bk[[paste0("a", k)]][j]
    sv$value[it & sv$name == "d"] <- bk$d[j]
  }
  cv <- grepl("^COV_", sv$name)
  sv$value[cv] <- as.numeric(substr(sv$name[cv], 5, 5) == substr(sv$name[cv], 6, 6))   # N(0, I)
  sv$est <- FALSE
  mod <- mirt(y, K, pars = sv, TOL = NaN, verbose = FALSE)
  stopifnot(!mod@Options$exploratory)
  mod
}
out <- function(mod, ids, stem) {
  K <- mod@Model$nfact
  for (m in c("ML", "WLE")) {
    f <- suppressWarnings(fscores(mod, method = m, full.scores.SE = TRUE, verbose = FALSE))
    f <- as.data.frame(f); names(f) <- c(paste0("theta_", 1:K), paste0("se_", 1:K))
    write.csv(data.frame(subject_id = ids, f), paste0(stem, "_", tolower(m), ".csv"),
              row.names = FALSE)
  }
}
bk <- read.csv("corr2f_bank.csv")
dat <- read.csv("../oblimin/corr2f.csv"); y <- as.matrix(dat[, -1])
out(fixed(y, bk), dat$subject, "corr2f")
ms <- read.csv("corr2f_missing.csv"); ym <- as.matrix(ms[, -1])
out(fixed(ym, bk), ms$subject, "corr2f_missing")
# extreme patterns, scored with the full data's model (response.pattern would drop the SEs of
# the Inf rows the same way): rows appended to the data, their scores kept
ex <- rbind(all_right = rep(1, 12), all_wrong = rep(0, 12),
            right_missing = c(NA, 1, 1, NA, 1, 1, 1, NA, 1, 1, 1, 1),
            wrong_missing = c(0, 0, NA, 0, 0, 0, NA, 0, 0, 0, 0, NA),
            one_answer = c(1, rep(NA, 11)),
            separable = c(rep(1, 6), rep(0, 6)),
            one_wrong = c(rep(1, 11), 0), one_right = c(rep(0, 11), 1),
            nothing = rep(NA, 12))
colnames(ex) <- colnames(y)
write.csv(data.frame(subject = rownames(ex), ex), "extreme.csv", row.names = FALSE)
ye <- rbind(y, ex)
mode <- fixed(ye, bk)
for (m in c("ML", "WLE")) {
  f <- suppressWarnings(fscores(mode, method = m, full.scores.SE = TRUE, verbose = FALSE))
  f <- as.data.frame(f)[nrow(y) + seq_len(nrow(ex)), ]
  names(f) <- c("theta_1", "theta_2", "se_1", "se_2")
  write.csv(data.frame(subject_id = rownames(ex), f), paste0("extreme_", tolower(m), ".csv"),
            row.names = FALSE)
}
# K = 3
it3 <- read.csv("../mirt_multidim_se/threefactor_items.csv")
wide <- reshape(it3[it3$parameter %in% c("a1", "a2", "a3", "d"), c("item", "parameter", "value")],
                idvar = "item", timevar = "parameter", direction = "wide")
bk3 <- data.frame(item_id = wide$item, a1 = wide$value.a1, a2 = wide$value.a2,
                  a3 = wide$value.a3, d = wide$value.d)
write.csv(bk3, "threefactor_bank.csv", row.names = FALSE)
y3 <- as.matrix(read.csv("../mirt_multidim_se/threefactor_data.csv"))[1:300, ]
y3[seq(1, length(y3), by = 7)] <- NA
ids3 <- sprintf("t%03d", 1:300)
write.csv(data.frame(subject = ids3, y3), "threefactor_missing.csv", row.names = FALSE)
out(fixed(y3, bk3), ids3, "threefactor")
