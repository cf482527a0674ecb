# A cron job that launches the paxcron-demo parameterized job every five
# seconds (`make demo` registers that job in its Nomad dev agent).
cron "hello" {
  schedule = "*/5 * * * * *"
  nomad { job = "paxcron-demo" }
}
