// A kafkajs 2.2.4 consumer group member for tests/groups: kafkajs consumes only through a group,
// with its default assignor (round robin, eager) and a commit after every batch. Prints one line
// per event to stdout; when stdin closes it disconnects, which commits and leaves the group.
//   node group_consumer.js BOOTSTRAP TOPIC GROUP NAME
// Lines: "ready", "join <protocol> <member id> <leader|follower> <p,p>",
// "record <partition> <offset> <value>", "crash <error>", "closed".
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, groupId, name] = process.argv.slice(2)
const say = line => process.stdout.write(line + '\n')

const kafka = new Kafka({
  clientId: name,
  brokers: [bootstrap],
  logLevel: logLevel.ERROR,
  retry: { initialRetryTime: 100, retries: 10 },
})
const consumer = kafka.consumer({
  groupId,
  sessionTimeout: 6000,
  heartbeatInterval: 300,
  rebalanceTimeout: 20000,
  maxWaitTimeInMs: 200,
})

consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
  const parts = (payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b)
  say(`join ${payload.groupProtocol} ${payload.memberId} ${payload.isLeader ? 'leader' : 'follower'} ${parts.join(',')}`)
})
consumer.on(consumer.events.CRASH, ({ payload }) => say(`crash ${payload.error && payload.error.message}`))

let stopping = false
async function stop() {
  if (stopping) return
  stopping = true
  try {
    await consumer.disconnect()
  } finally {
    say('closed')
    process.exit(0)
  }
}
process.stdin.on('end', stop)
process.stdin.on('close', stop)
process.stdin.resume()

async function main() {
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  say('ready')
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      say(`record ${partition} ${message.offset} ${message.value.toString()}`)
    },
  })
}

main().catch(e => {
  say(`crash ${e.message}`)
  process.exit(1)
})
