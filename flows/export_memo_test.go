package flows

// SetMemoCheck sets the memo's check (memoCheck) for the tests of
// flows_test; nil removes it.
func SetMemoCheck(fn func(key int16, response, changed bool)) { memoCheck = fn }

// MemoHeld is what the analyzer's memos hold (memo.go).
func (a *Analyzer) MemoHeld() int64 { return a.memoHeld }

// MemoBudget is what one analyzer's memos may hold together.
const MemoBudget = memoBudget
