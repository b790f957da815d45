// go_park: a Go program whose threads sleep in the runtime's futex (an idle M parks in
// runtime.notesleep, sysmon in notetsleep): lockscope must unwind those stacks, taken in
// code Go built, by frame pointers. Goroutines sleep and wake each other for --seconds.
package main

import (
	"flag"
	"fmt"
	"sync"
	"time"
)

func main() {
	seconds := flag.Float64("seconds", 2, "how long to run")
	workers := flag.Int("workers", 8, "goroutines passing a token around")
	flag.Parse()

	deadline := time.Now().Add(time.Duration(*seconds * float64(time.Second)))
	chans := make([]chan int, *workers)
	for i := range chans {
		chans[i] = make(chan int)
	}
	var wg sync.WaitGroup
	var passes [64]int
	for i := 0; i < *workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for tok := range chans[i] {
				// a short sleep parks the goroutine, and with nothing else to run its
				// thread (M) parks in the runtime's futex
				time.Sleep(200 * time.Microsecond)
				passes[i%len(passes)]++
				if tok < 0 || time.Now().After(deadline) {
					for j := range chans {
						if j != i {
							close(chans[j])
						}
					}
					return
				}
				chans[(i+1)%len(chans)] <- tok + 1
			}
		}(i)
	}
	chans[0] <- 0
	wg.Wait()
	total := 0
	for _, n := range passes {
		total += n
	}
	fmt.Printf("passes %d\n", total)
}
