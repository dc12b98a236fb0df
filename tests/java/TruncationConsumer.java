// A careful Java consumer (auto.offset.reset=none) of one partition for the unclean-recovery test:
// prints one line per event to stdout, and on LogTruncationException (KIP-320: fenced, then
// OffsetsForLeaderEpoch shows the log it read was truncated) seeks to the divergent offset.
//   java TruncationConsumer BOOTSTRAP TOPIC PARTITION SECONDS
// Lines: "record <offset> <value>", "truncation <position> <divergent offset>", "error <text>".
// Stops after SECONDS or when stdin closes.
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.LogTruncationException;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class TruncationConsumer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("auto.offset.reset", "none");
        props.put("enable.auto.commit", "false");
        props.put("client.id", "java-truncation-consumer");
        props.put("metadata.max.age.ms", "1000");
        props.put("reconnect.backoff.max.ms", "500");
        TopicPartition tp = new TopicPartition(args[1], Integer.parseInt(args[2]));
        long deadline = System.currentTimeMillis() + Long.parseLong(args[3]) * 1000L;
        Thread stdin = new Thread(() -> {
            try { while (System.in.read() >= 0) { } } catch (Exception e) { }
            System.exit(0);
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            consumer.assign(List.of(tp));
            consumer.seek(tp, 0);
            System.out.println("ready");
            System.out.flush();
            while (System.currentTimeMillis() < deadline) {
                try {
                    for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                        System.out.println("record " + r.offset() + " " + new String(r.value(), StandardCharsets.UTF_8));
                    }
                } catch (LogTruncationException e) {
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> d : e.divergentOffsets().entrySet()) {
                        System.out.println("truncation " + e.offsetOutOfRangePartitions().get(d.getKey()) + " " + d.getValue().offset());
                        consumer.seek(d.getKey(), d.getValue());
                    }
                    if (e.divergentOffsets().isEmpty()) {
                        System.out.println("truncation " + e.offsetOutOfRangePartitions().get(tp) + " unknown");
                    }
                } catch (KafkaException e) {
                    System.out.println("error " + e.getClass().getSimpleName() + ": " + e.getMessage());
                }
                System.out.flush();
            }
        }
    }
}
