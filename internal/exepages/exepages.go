// Package exepages keeps the executable's own pages from counting against
// a long command's memory.
//
// dlqctl is a large executable (it links the Redis, Pulsar, Kafka, AWS and
// SQLite clients). Linux kernels that keep files in the page cache as large
// folios (ext4, XFS and tmpfs on 6.x) map a read-only ELF segment with 2 MiB
// page-table entries wherever the segment is 2 MiB-aligned, which Go's
// linker always makes it: one instruction or one constant read from a
// 2 MiB stretch makes the whole stretch resident. Start-up runs the init
// functions of every linked package, so by the time main runs nearly the
// whole text and read-only data (about 50 MiB) is resident, although a
// command like stats executes a small part of it. Release drops those
// mappings once, early, and marks them not to be mapped in huge pages
// again, so what a command uses afterwards comes back in 4 KiB pages, and
// its resident size follows the code it runs rather than the size of the
// binary.
package exepages
