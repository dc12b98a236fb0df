// Produce N records with the Java client (acks=all, idempotent), then read them back with
// assign + seek: for the TLS tests, and any test that needs the Java client to write and read.
//   java RoundTrip BOOTSTRAP TOPIC N PROPERTIES_FILE
// PROPERTIES_FILE holds extra client properties (security.protocol, ssl.*), applied to both.
// Lines: "produced <offset of the first> <offset of the last>", "record <offset> <key> <value>"
// per record read, "done"; "error <text>" and exit 1 on a failure.
import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class RoundTrip {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int n = Integer.parseInt(args[2]);
        Properties extra = new Properties();
        try (FileInputStream in = new FileInputStream(args[3])) { extra.load(in); }
        try {
            Properties p = new Properties();
            p.putAll(extra);
            p.put("bootstrap.servers", bootstrap);
            p.put("acks", "all");
            p.put("linger.ms", "5");
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer =
                     new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
                for (int i = 0; i < n; i++) {
                    sent.add(producer.send(new ProducerRecord<>(topic, 0, bytes("k" + i), bytes("v" + i))));
                }
                producer.flush();
                System.out.println("produced " + sent.get(0).get().offset() + " " + sent.get(n - 1).get().offset());
            }
            Properties c = new Properties();
            c.putAll(extra);
            c.put("bootstrap.servers", bootstrap);
            c.put("enable.auto.commit", "false");
            c.put("auto.offset.reset", "none");
            TopicPartition tp = new TopicPartition(topic, 0);
            int read = 0;
            long deadline = System.currentTimeMillis() + 60_000;
            try (KafkaConsumer<byte[], byte[]> consumer =
                     new KafkaConsumer<>(c, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
                consumer.assign(List.of(tp));
                consumer.seek(tp, 0);
                while (read < n && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        System.out.println("record " + r.offset() + " " + text(r.key()) + " " + text(r.value()));
                        read++;
                    }
                }
            }
            System.out.println("done");
        } catch (Exception e) {
            System.out.println("error " + e);
            System.exit(1);
        }
    }

    static byte[] bytes(String s) { return s.getBytes(StandardCharsets.UTF_8); }
    static String text(byte[] b) { return b == null ? "-" : new String(b, StandardCharsets.UTF_8); }
}
