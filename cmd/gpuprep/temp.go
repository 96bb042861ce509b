package main

import (
	"errors"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Temporary files and directories a command makes outside the host it works
// on (a packed --root unpacked, a snapshot being taken or packed) go when it
// ends, and also when it is interrupted: while one exists, SIGINT, SIGTERM
// and SIGHUP remove them and end the process with 128 + the signal's
// number, as a shell reports a process that signal killed; a command busy
// writing them (tempsBusy: unpacking, taking or placing a snapshot) is
// first let stop at its next safe point (tempsStopped: between files,
// before it puts a snapshot in place), up to stopWait, so that nothing is
// written into what is being removed. Commands that change a
// host make no such files; their own writes are atomic (a temporary file
// renamed into place) and are not cut short by this.
var temps struct {
	sync.Mutex                // held while a snapshot is put in place, and by the removal
	paths      map[string]int // path → registrations
	sig        chan os.Signal
	stopped    atomic.Bool
	signo      atomic.Int32 // the interrupt's signal number
	busy       atomic.Int32
}

// tempsBusy marks the caller as writing temporary files until done is
// called: an interrupt then waits for it to stop (see temps).
func tempsBusy() (done func()) {
	temps.busy.Add(1)
	var once sync.Once
	return func() { once.Do(func() { temps.busy.Add(-1) }) }
}

// stopWait is how long an interrupted command has to stop by itself.
var stopWait = 5 * time.Second

// tempsStopped reports whether an interrupt asked the command to stop.
func tempsStopped() bool { return temps.stopped.Load() }

// errInterrupted is what a command an interrupt stopped at a safe point
// returns (its exit code is set when returned: see interrupted).
var errInterrupted = errors.New("interrupted: nothing was written")

// interrupted is errInterrupted with the exit code of the interrupt.
func interrupted() error {
	return &exitError{code: 128 + int(temps.signo.Load()), err: errInterrupted}
}

// interruptSignals are the signals gpuprep treats as an interrupt.
var interruptSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// removeOnSignal has p removed if the process is interrupted, until
// release is called (which does not remove it). After an interrupt the
// process ends through exit (deps.exitOnSignal) given by the registration
// that started listening.
func removeOnSignal(p string, exit func(code int)) (release func()) {
	temps.Lock()
	defer temps.Unlock()
	if temps.paths == nil {
		temps.paths = map[string]int{}
	}
	temps.paths[p]++
	if temps.sig == nil {
		temps.sig = make(chan os.Signal, 1)
		signal.Notify(temps.sig, interruptSignals...)
		go removeTemps(temps.sig, exit)
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

func removeTemps(sig chan os.Signal, exit func(code int)) {
	s, ok := <-sig
	if !ok {
		return
	}
	temps.signo.Store(int32(signalNumber(s)))
	temps.stopped.Store(true)
	for end := time.Now().Add(stopWait); temps.busy.Load() > 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	temps.Lock() // held to the end: no release, no commit races the removal
	for p := range temps.paths {
		_ = os.RemoveAll(p) // on the way out: nowhere to report it but the exit
	}
	exit(128 + signalNumber(s))
	// Only a test's exit returns.
	signal.Stop(sig)
	temps.paths, temps.sig = nil, nil
	temps.stopped.Store(false)
	temps.Unlock()
}
