module github.com/seqd/seqd

go 1.26.8
