package detectors

// AnswersComputed is how many times the Set computed Exchange.Answers.
func (s *Set) AnswersComputed() int64 { return s.answers.computed }
