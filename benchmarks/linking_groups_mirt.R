# Second reference for benchmarks/study_linking_groups.py (benchmarks/results/linking_groups.md):
# mirt's multiple-group 2PL (or 3PL: second argument) on the ARC hard split, K = 20 anchors (the
# stacked matrix the study writes with --export DIR): the anchors' parameters equal across groups, the weak group
# N(0, 1), the strong group's mean and variance free. Its mean and SD are the linking constants
# B and A (theta_weak = A theta_strong + B). Run: Rscript benchmarks/linking_groups_mirt.R DIR [3PL]
suppressMessages(library(mirt))
args <- commandArgs(trailingOnly = TRUE)
dir <- args[1]
itemtype <- if (length(args) > 1) args[2] else "2PL"
stem <- file.path(dir, paste0("arc_", tolower(itemtype), "_hard_K20"))
x <- read.csv(paste0(stem, ".csv"), row.names = 1, check.names = FALSE)
anchors <- as.character(read.csv(paste0(stem, "_anchors.csv"))$item_id)
group <- ifelse(x$group == 1, "strong", "weak")
x$group <- NULL
varies <- function(v) length(unique(v[!is.na(v)])) > 1   # an item all right (wrong) in a group
keep <- sapply(x, function(v) all(tapply(v, group, function(g) all(is.na(g)) || varies(g))))
x <- x[, keep]
anchors <- intersect(anchors, names(x))
t0 <- Sys.time()
fit <- multipleGroup(x, 1, group = factor(group, levels = c("weak", "strong")), itemtype = itemtype,
                     invariance = c(anchors, "free_means", "free_var"), verbose = FALSE,
                     technical = list(NCYCLES = 2000))
gp <- coef(fit, simplify = TRUE)$strong
cat(sprintf("mirt multipleGroup %s, ARC hard split, %d anchors, %d x %d: strong group mean (B) %.3f, SD (A) %.3f, converged %s (%.0f s)\n",
            itemtype, length(anchors), nrow(x), ncol(x), gp$means[1], sqrt(gp$cov[1, 1]),
            extract.mirt(fit, "converged"), as.numeric(difftime(Sys.time(), t0, units = "secs"))))
