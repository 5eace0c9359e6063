package dlock

import (
	"fmt"
	"sync"
)

// One lease per key and holder in a process: the server gives a second
// acquire by the same holder the same token, so two leases would each
// believe they hold the key alone.  A key and holder are taken from the
// start of a lease's acquire until its release has been answered (a lost
// lease too, until Release).
var inUse = struct {
	sync.Mutex
	m map[[2]string]bool
}{m: map[[2]string]bool{}}

func takeHolder(keys []string, holder string) error {
	inUse.Lock()
	defer inUse.Unlock()
	for _, k := range keys {
		if inUse.m[[2]string{k, holder}] {
			return fmt.Errorf("%w: key %q with holder %q is another lease's of this process until its release", ErrHolderInUse, k, holder)
		}
	}
	for _, k := range keys {
		inUse.m[[2]string{k, holder}] = true
	}
	return nil
}

func freeHolder(keys []string, holder string) {
	inUse.Lock()
	defer inUse.Unlock()
	for _, k := range keys {
		delete(inUse.m, [2]string{k, holder})
	}
}
