// The Java client on a compacted topic (tests/clients/test_compaction.py):
//   java CompactedTopic create BOOTSTRAP TOPIC name=value,name=value   -> "created"
//   java CompactedTopic write BOOTSTRAP TOPIC < lines "key value" ("-" as the value: a tombstone)
//        -> "acked <line number> <offset>" per line (in line order), then "done"
//   java CompactedTopic read BOOTSTRAP TOPIC END
//        -> "record <offset> <key> <value or ->" per record from the beginning up to END, then "done"
//   java CompactedTopic alter BOOTSTRAP TOPIC name=value,...   (incrementalAlterConfigs, SET) -> "altered"
//   java CompactedTopic describe BOOTSTRAP TOPIC -> "config <name> <value> <source>" per config
// The producer is the client's default (idempotent, acks=all). "error <text>" and exit 1 on a failure.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class CompactedTopic {
    public static void main(String[] args) throws Exception {
        String mode = args[0], bootstrap = args[1], topic = args[2];
        try {
            if (mode.equals("create")) create(bootstrap, topic, args[3]);
            else if (mode.equals("write")) write(bootstrap, topic);
            else if (mode.equals("alter")) alter(bootstrap, topic, args[3]);
            else if (mode.equals("describe")) describe(bootstrap, topic);
            else read(bootstrap, topic, Long.parseLong(args[3]));
            System.out.println("done");
        } catch (Exception e) {
            System.out.println("error " + e);
            System.exit(1);
        }
    }

    static void create(String bootstrap, String topic, String configs) throws Exception {
        Map<String, String> config = new HashMap<>();
        for (String pair : configs.split(",")) {
            String[] kv = pair.split("=", 2);
            config.put(kv[0], kv[1]);
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1).configs(config))).all().get();
        }
        System.out.println("created");
    }

    static void alter(String bootstrap, String topic, String configs) throws Exception {
        List<AlterConfigOp> ops = new ArrayList<>();
        for (String pair : configs.split(",")) {
            String[] kv = pair.split("=", 2);
            ops.add(new AlterConfigOp(new ConfigEntry(kv[0], kv[1]), AlterConfigOp.OpType.SET));
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
        }
        System.out.println("altered");
    }

    static void describe(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            Config config = admin.describeConfigs(List.of(resource)).all().get().get(resource);
            for (ConfigEntry e : config.entries()) {
                System.out.println("config " + e.name() + " " + e.value() + " " + e.source());
            }
        }
    }

    static void write(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("linger.ms", "5");
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                String[] kv = line.split(" ", 2);
                byte[] value = kv[1].equals("-") ? null : bytes(kv[1]);
                sent.add(producer.send(new ProducerRecord<>(topic, 0, bytes(kv[0]), value)));
            }
            producer.flush();
        }
        StringBuilder out = new StringBuilder();
        for (int i = 0; i < sent.size(); i++) {
            out.append("acked ").append(i).append(' ').append(sent.get(i).get().offset()).append('\n');
        }
        System.out.print(out);
    }

    static void read(String bootstrap, String topic, long end) {
        Properties c = new Properties();
        c.put("bootstrap.servers", bootstrap);
        c.put("enable.auto.commit", "false");
        c.put("auto.offset.reset", "none");
        TopicPartition tp = new TopicPartition(topic, 0);
        long deadline = System.currentTimeMillis() + 120_000;
        StringBuilder out = new StringBuilder();
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    out.append("record ").append(r.offset()).append(' ').append(text(r.key())).append(' ')
                       .append(text(r.value())).append('\n');
                }
            }
        }
        System.out.print(out);
    }

    static byte[] bytes(String s) { return s.getBytes(StandardCharsets.UTF_8); }
    static String text(byte[] b) { return b == null ? "-" : new String(b, StandardCharsets.UTF_8); }
}
