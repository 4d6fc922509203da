# catR::randomCAT on a 60-item 4PL bank, answers given (25 simulees): start at the item with b
# nearest 0 (startSelect "bOpt"), MFI without randomesque, EAP on 33 nodes of [-4, 4], 20 items.
# Run from tests/data/catr_4pl: Rscript make_reference.R -> randomcat.csv (0-based item rows)
# bank.csv / responses.csv: a simulated 4PL bank (a, b, c, u) and 0/1 answers, subjects s0 all right, s1 all wrong.
suppressPackageStartupMessages(library(catR))
b <- read.csv("bank.csv"); it <- as.matrix(b[,c("a","b","c","u")]); Y <- as.matrix(read.csv("responses.csv")[,-1])
out <- NULL
for (i in 1:nrow(Y)) {
 res <- randomCAT(itemBank=it, responses=Y[i,], start=list(nrItems=1, theta=0, randomesque=1, startSelect="bOpt"),
   test=list(method="EAP", itemSelect="MFI", randomesque=1, parInt=c(-4,4,33)),
   stop=list(rule="length", thr=20), final=list(method="EAP", parInt=c(-4,4,33)))
 out <- rbind(out, data.frame(subject=i-1, step=1:20, item=res$testItems-1, theta=res$thetaProv, se=res$seProv))
}
write.csv(out, "randomcat.csv", row.names=FALSE)
