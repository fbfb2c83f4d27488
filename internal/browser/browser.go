// Package browser is a test helper: headless Chromium driven over the
// DevTools protocol on a pipe (--remote-debugging-pipe: no port, nothing
// listening), to open a page and see what a reader's browser would: the
// console's errors, uncaught exceptions, every request the page makes,
// dialogs, the DOM (by evaluating JavaScript) and a screenshot.
//
// Chromium is Debian's package, installed by install-chromium.sh (beside
// this file) when it is missing; Path runs it.
package browser

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Path returns the path of a Chromium, installing Debian's package first
// when none is on the PATH (install-chromium.sh: needs root and a package
// mirror, as CI has).
func Path() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate install-chromium.sh")
	}
	script := filepath.Join(filepath.Dir(file), "install-chromium.sh")
	var stderr bytes.Buffer
	cmd := exec.Command("/bin/sh", script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %v: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// Browser is one headless Chromium with one page.
type Browser struct {
	cmd     *exec.Cmd
	w       *os.File
	stderr  bytes.Buffer
	session string

	mu      sync.Mutex
	next    int
	waiting map[int]chan reply
	events  []event
	changed chan struct{} // closed and replaced when an event arrives
	dead    error
	done    chan struct{}
}

type reply struct {
	Result json.RawMessage
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
}

type event struct {
	Method string
	Params json.RawMessage
}

// Start runs Chromium at path headless, its profile in dir, with a page of
// w x h CSS pixels.
func Start(path, dir string, w, h int) (*Browser, error) {
	// fd 3: what Chromium reads (our commands); fd 4: what it writes.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	b := &Browser{w: cmdW, waiting: map[int]chan reply{}, changed: make(chan struct{}), done: make(chan struct{})}
	b.cmd = exec.Command(path, "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
		"--disable-background-networking", "--disable-component-update", "--disable-default-apps",
		"--mute-audio", "--hide-scrollbars", "--force-device-scale-factor=1",
		fmt.Sprintf("--window-size=%d,%d", w, h), "--user-data-dir="+dir, "about:blank")
	b.cmd.ExtraFiles = []*os.File{cmdR, outW}
	b.cmd.Stderr = &b.stderr
	if err := b.cmd.Start(); err != nil {
		return nil, err
	}
	cmdR.Close()
	outW.Close()
	go b.read(outR)
	var targets struct {
		TargetInfos []struct {
			TargetID string `json:"targetId"`
			Type     string `json:"type"`
		} `json:"targetInfos"`
	}
	if err := b.call("", "Target.getTargets", nil, &targets); err != nil {
		b.Close()
		return nil, err
	}
	id := ""
	for _, t := range targets.TargetInfos {
		if t.Type == "page" {
			id = t.TargetID
		}
	}
	if id == "" {
		var created struct {
			TargetID string `json:"targetId"`
		}
		if err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &created); err != nil {
			b.Close()
			return nil, err
		}
		id = created.TargetID
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call("", "Target.attachToTarget", map[string]any{"targetId": id, "flatten": true}, &attached); err != nil {
		b.Close()
		return nil, err
	}
	b.session = attached.SessionID
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable", "Network.enable"} {
		if err := b.Call(m, nil, nil); err != nil {
			b.Close()
			return nil, err
		}
	}
	if err := b.Call("Emulation.setDeviceMetricsOverride", map[string]any{"width": w, "height": h, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *Browser) read(r *os.File) {
	defer close(b.done)
	br := bufio.NewReader(r)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.dead = fmt.Errorf("chromium's pipe closed (%v); its stderr: %s", err, lastLines(b.stderr.String(), 5))
			for _, c := range b.waiting {
				close(c)
			}
			b.waiting = map[int]chan reply{}
			b.mu.Unlock()
			return
		}
		var m struct {
			ID     int             `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			reply
		}
		if err := json.Unmarshal(msg[:len(msg)-1], &m); err != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if c := b.waiting[m.ID]; c != nil {
				c <- m.reply
				delete(b.waiting, m.ID)
			}
		} else {
			b.events = append(b.events, event{m.Method, m.Params})
			close(b.changed)
			b.changed = make(chan struct{})
		}
		b.mu.Unlock()
	}
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// Call sends a command to the page and decodes its result into result (if
// not nil).
func (b *Browser) Call(method string, params, result any) error {
	return b.call(b.session, method, params, result)
}

func (b *Browser) call(session, method string, params, result any) error {
	b.mu.Lock()
	if b.dead != nil {
		b.mu.Unlock()
		return b.dead
	}
	b.next++
	id := b.next
	c := make(chan reply, 1)
	b.waiting[id] = c
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := b.w.Write(append(data, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r, ok := <-c:
		if !ok {
			b.mu.Lock()
			defer b.mu.Unlock()
			return fmt.Errorf("%s: %w", method, b.dead)
		}
		if r.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, r.Error.Message, r.Error.Code)
		}
		if result != nil {
			return json.Unmarshal(r.Result, result)
		}
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s: no answer from chromium in 60 s", method)
	}
}

// Load is what happened while a page loaded.
type Load struct {
	// Console holds the console's messages at warning and error level
	// (console.error, CSP violations, failed loads), and uncaught
	// exceptions.
	Console []string
	// Requests are the URLs of every request the page made, its own
	// first.
	Requests []string
	// Dialogs are the messages of alert, confirm and prompt dialogs.
	Dialogs []string
}

// Open loads url and waits for its load event and a moment after it (for
// what the page's scripts do at once).
func (b *Browser) Open(url string) (*Load, error) {
	b.mu.Lock()
	from := len(b.events)
	b.mu.Unlock()
	if err := b.Call("Page.navigate", map[string]any{"url": url}, nil); err != nil {
		return nil, err
	}
	deadline := time.After(60 * time.Second)
	loaded := false
	var settle <-chan time.Time
	seen := from
	for {
		b.mu.Lock()
		evs := b.events[seen:]
		seen = len(b.events)
		changed := b.changed
		b.mu.Unlock()
		for _, e := range evs {
			if e.Method == "Page.loadEventFired" && !loaded {
				loaded = true
				settle = time.After(300 * time.Millisecond)
			}
			if e.Method == "Page.javascriptDialogOpening" {
				go b.Call("Page.handleJavaScriptDialog", map[string]any{"accept": false}, nil)
			}
		}
		select {
		case <-changed:
		case <-settle:
			return b.load(from), nil
		case <-deadline:
			return b.load(from), fmt.Errorf("%s: not loaded in 60 s", url)
		}
	}
}

// load gathers what the events from index from say.
func (b *Browser) load(from int) *Load {
	b.mu.Lock()
	evs := append([]event{}, b.events[from:]...)
	b.mu.Unlock()
	l := &Load{}
	for _, e := range evs {
		switch e.Method {
		case "Runtime.consoleAPICalled":
			var p struct {
				Type string `json:"type"`
				Args []struct {
					Value       any    `json:"value"`
					Description string `json:"description"`
				} `json:"args"`
			}
			if json.Unmarshal(e.Params, &p) == nil && (p.Type == "error" || p.Type == "warning" || p.Type == "assert") {
				var parts []string
				for _, a := range p.Args {
					parts = append(parts, fmt.Sprint(a.Value)+a.Description)
				}
				l.Console = append(l.Console, "console."+p.Type+": "+strings.Join(parts, " "))
			}
		case "Runtime.exceptionThrown":
			var p struct {
				Details struct {
					Text      string `json:"text"`
					Exception struct {
						Description string `json:"description"`
					} `json:"exception"`
				} `json:"exceptionDetails"`
			}
			if json.Unmarshal(e.Params, &p) == nil {
				l.Console = append(l.Console, "exception: "+p.Details.Text+" "+p.Details.Exception.Description)
			}
		case "Log.entryAdded":
			var p struct {
				Entry struct {
					Source string `json:"source"`
					Level  string `json:"level"`
					Text   string `json:"text"`
					URL    string `json:"url"`
				} `json:"entry"`
			}
			if json.Unmarshal(e.Params, &p) == nil && (p.Entry.Level == "error" || p.Entry.Level == "warning") {
				l.Console = append(l.Console, fmt.Sprintf("%s %s: %s %s", p.Entry.Source, p.Entry.Level, p.Entry.Text, p.Entry.URL))
			}
		case "Network.requestWillBeSent":
			var p struct {
				Request struct {
					URL string `json:"url"`
				} `json:"request"`
			}
			if json.Unmarshal(e.Params, &p) == nil {
				l.Requests = append(l.Requests, p.Request.URL)
			}
		case "Page.javascriptDialogOpening":
			var p struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(e.Params, &p) == nil {
				l.Dialogs = append(l.Dialogs, p.Message)
			}
		}
	}
	return l
}

// Eval evaluates a JavaScript expression in the page and decodes its value
// (returned by value: JSON-able) into out.
func (b *Browser) Eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := b.Call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("evaluating %.60q: %s %s", expr, r.Exception.Text, r.Exception.Exception.Description)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// Screenshot returns a PNG of the page's viewport.
func (b *Browser) Screenshot() ([]byte, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := b.Call("Page.captureScreenshot", map[string]any{"format": "png"}, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

// Close ends Chromium.
func (b *Browser) Close() {
	_ = b.call("", "Browser.close", nil, nil)
	b.w.Close()
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		b.cmd.Process.Kill()
	}
	b.cmd.Wait()
}
