package table

import "golang.org/x/sys/unix"

// hugePages asks that b be backed by transparent huge pages where the
// system allows it (/sys/kernel/mm/transparent_hugepage/enabled "always"
// or "madvise"); elsewhere it changes nothing.
func hugePages(b []byte) { unix.Madvise(b, unix.MADV_HUGEPAGE) }
