package classify_test

import (
	"encoding/json"
	"fmt"

	"github.com/triage-dev/triage/classify"
)

// An OpenAI 429 that is not a rate limit: the body says the account is out of
// quota, so the key is exhausted and no retry is scheduled.
func ExampleClassify() {
	v := classify.Classify(classify.Observation{
		Vendor: "openai",
		Path:   classify.PathDirect,
		Phase:  classify.PhaseResponse,
		Status: 429,
		Body:   `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`,
	})
	out, _ := json.Marshal(v)
	fmt.Println(string(out))
	// Output:
	// {"class":"exhausted","retry_after_s":null,"code":"insufficient_quota","reason":"billing_quota","known":true,"decided_by":"vendor_rule"}
}
