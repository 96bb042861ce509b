package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Temporary files and directories a command makes outside the host it works
// on (a packed --root unpacked, a snapshot being taken or packed) go when it
// ends, and also when it is interrupted: while one exists, SIGINT, SIGTERM
// and SIGHUP remove them and end the process with 128 + the signal's
// number, as a shell reports a process that signal killed. Commands that
// change a host make no such files; their own writes are atomic (a
// temporary file renamed into place) and are not cut short by this.
var temps struct {
	sync.Mutex
	paths map[string]int // path → registrations
	sig   chan os.Signal
}

// exitOnSignal ends the process after an interrupt (a variable: tests
// deliver a real signal and keep the test process).
var exitOnSignal = os.Exit

// removeOnSignal has p removed if the process is interrupted, until
// release is called (which does not remove it).
func removeOnSignal(p string) (release func()) {
	temps.Lock()
	defer temps.Unlock()
	if temps.paths == nil {
		temps.paths = map[string]int{}
	}
	temps.paths[p]++
	if temps.sig == nil {
		temps.sig = make(chan os.Signal, 1)
		signal.Notify(temps.sig, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		go removeTemps(temps.sig)
	}
	sig := temps.sig
	var once sync.Once
	return func() {
		once.Do(func() {
			temps.Lock()
			defer temps.Unlock()
			if n := temps.paths[p]; n > 1 {
				temps.paths[p] = n - 1
			} else {
				delete(temps.paths, p)
			}
			if len(temps.paths) == 0 && temps.sig == sig {
				signal.Stop(temps.sig)
				close(temps.sig)
				temps.sig = nil
			}
		})
	}
}

func removeTemps(sig chan os.Signal) {
	s, ok := <-sig
	if !ok {
		return
	}
	temps.Lock() // held to the end: no release races the removal
	for p := range temps.paths {
		os.RemoveAll(p)
	}
	exitOnSignal(128 + signalNumber(s))
	// Only a test's exitOnSignal returns.
	signal.Stop(sig)
	temps.paths, temps.sig = nil, nil
	temps.Unlock()
}
