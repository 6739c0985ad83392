// SPDX-License-Identifier: MIT
//
// A cgo Go program for tests/integration/test_go.sh: goroutines whose stacks
// grow (runtime.copystack reads every return address on them), panics
// recovered deep in a recursion, GC while they run, tracebacks
// (runtime.Callers), and calls into C that call C and call back into Go. Its
// output depends on nothing but the computation, so a profiled run must
// print exactly what an unprofiled one does.
package main

/*
#include <stdint.h>

uint64_t c_leaf(uint64_t x);
uint64_t c_work(uint64_t x, int n);
uint64_t c_calls_go(uint64_t x);
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
)

var callbackOnce sync.Once
var callbackFrames string

//export go_callback
func go_callback(x C.uint64_t) C.uint64_t {
	callbackOnce.Do(func() { callbackFrames = frames() })
	return C.uint64_t(grow(int(x%64), 0)) + x
}

// grow recurses with a large frame: the goroutine's stack is copied several times.
//
//go:noinline
func grow(n int, seed int) int {
	var pad [512]byte
	pad[n%512] = byte(n + seed)
	if n == 0 {
		return int(pad[0])
	}
	return grow(n-1, seed) + int(pad[n%512]&3)
}

// deepPanic panics at the bottom of a recursion; recovered at the top.
//
//go:noinline
func deepPanic(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	if n == 0 {
		panic(fmt.Sprintf("bottom %d", pad[0]))
	}
	return deepPanic(n-1) + int(pad[n%256]&1)
}

func recovered(n int) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	deepPanic(n)
	return "no panic"
}

// frames names the Go functions on this goroutine's stack (a traceback).
func frames() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(1, pcs)
	it := runtime.CallersFrames(pcs[:n])
	var names []string
	for {
		f, more := it.Next()
		if strings.HasPrefix(f.Function, "main.") {
			names = append(names, f.Function)
		}
		if !more {
			break
		}
	}
	return strings.Join(names, "<")
}

func worker(id int, out []string, wg *sync.WaitGroup) {
	defer wg.Done()
	sum := 0
	for round := 0; round < 20; round++ {
		sum += grow(100+id*30+round, id)
		sum += int(C.c_work(C.uint64_t(id*1000+round), 50) & 0xffff)
		sum += int(C.c_calls_go(C.uint64_t(round)) & 0xff)
		if round%5 == 0 {
			runtime.GC()
		}
	}
	out[id] = fmt.Sprintf("worker %d: %d, %s, %s", id, sum, recovered(200+id), frames())
}

func main() {
	var wg sync.WaitGroup
	out := make([]string, 8)
	for i := range out {
		wg.Add(1)
		go worker(i, out, &wg)
	}
	wg.Wait()
	for _, line := range out {
		fmt.Println(line)
	}
	fmt.Println("traceback in a callback from C:", callbackFrames)
	fmt.Fprintln(os.Stderr, "go_cgo: done")
}
