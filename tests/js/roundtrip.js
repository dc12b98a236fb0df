// Produce N records with kafkajs 2.2.4 (acks=all), then read them back: for the TLS tests.
// kafkajs consumes only through a group, so the read is a group member of a fresh group id.
//   node roundtrip.js BOOTSTRAP TOPIC N CA_FILE [MECHANISM USER PASSWORD]
// CA_FILE '-': no TLS. MECHANISM: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (a SASL login).
// Lines: "produced <first offset>", "record <offset> <key> <value>" per record read, "done";
// "error <text>" and exit 1 on a failure.
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const [bootstrap, topic, count, caFile, mechanism, username, password] = process.argv.slice(2)
const n = parseInt(count, 10)
const say = line => process.stdout.write(line + '\n')

const kafka = new Kafka({
  clientId: 'kafkajs-roundtrip',
  brokers: [bootstrap],
  ssl: caFile && caFile !== '-' ? { ca: [fs.readFileSync(caFile, 'utf-8')] } : false,
  sasl: mechanism ? { mechanism: mechanism.toLowerCase(), username, password } : undefined,
  logLevel: logLevel.ERROR,
  retry: { initialRetryTime: 100, retries: 10 },
})

async function main() {
  const producer = kafka.producer()
  await producer.connect()
  const messages = []
  for (let i = 0; i < n; i++) messages.push({ key: `k${i}`, value: `v${i}`, partition: 0 })
  const results = await producer.send({ topic, acks: -1, messages })
  say(`produced ${results[0].baseOffset}`)
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId: `roundtrip-${Date.now()}`, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  let read = 0
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`read ${read}/${n} in 60 s`)), 60000)
    consumer.run({
      eachMessage: async ({ message }) => {
        say(`record ${message.offset} ${message.key} ${message.value}`)
        read++
        if (read >= n) { clearTimeout(timer); resolve() }
      },
    }).catch(reject)
  })
  await consumer.disconnect()
  say('done')
}

main().then(() => process.exit(0), e => { say(`error ${e.message || e}`); process.exit(1) })
