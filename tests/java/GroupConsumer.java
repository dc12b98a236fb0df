// A Java consumer group member (subscribe(), auto commit) for tests/groups: prints one line per
// event to stdout, and on stdin closing leaves the group cleanly (close(): a final commit, then
// LeaveGroup; a static member only commits, KIP-345).
//   java GroupConsumer BOOTSTRAP TOPIC GROUP STRATEGY NAME [INSTANCE_ID]
// STRATEGY: range | roundrobin | cooperative-sticky.
// Lines: "ready", "revoked <generation> <p,p>", "added <generation> <p,p>", "lost <p,p>",
// "assignment <generation> <p,p>" (after every change), "record <partition> <offset> <value>",
// "error <text>", "closed".
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.RoundRobinAssignor;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class GroupConsumer {
    static volatile boolean stopping = false;

    static String partitions(Collection<TopicPartition> tps) {
        return new TreeSet<>(tps.stream().map(TopicPartition::partition).collect(Collectors.toSet()))
            .stream().map(String::valueOf).collect(Collectors.joining(","));
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String strategy = switch (args[3]) {
            case "range" -> RangeAssignor.class.getName();
            case "roundrobin" -> RoundRobinAssignor.class.getName();
            case "cooperative-sticky" -> CooperativeStickyAssignor.class.getName();
            default -> throw new IllegalArgumentException(args[3]);
        };
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[2]);
        props.put("client.id", args[4]);
        props.put("partition.assignment.strategy", strategy);
        props.put("auto.offset.reset", "earliest");
        props.put("enable.auto.commit", "true");
        props.put("auto.commit.interval.ms", "200");
        props.put("heartbeat.interval.ms", "300");
        props.put("session.timeout.ms", "6000");
        props.put("metadata.max.age.ms", "1000");
        props.put("reconnect.backoff.max.ms", "500");
        if (args.length > 5) {
            props.put("group.instance.id", args[5]);
            // A static member is meant to outlive its restarts (KIP-345): its session is
            // longer than a JVM takes to come back on a busy machine. (The rebalances once
            // blamed on this came from the coordinator comparing subscription bytes: f3eea93.)
            props.put("session.timeout.ms", "30000");
        }
        KafkaConsumer<byte[], byte[]> consumer =
            new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        Thread stdin = new Thread(() -> {
            try { while (System.in.read() >= 0) { } } catch (Exception e) { }
            stopping = true;
            consumer.wakeup();
        });
        stdin.setDaemon(true);
        stdin.start();
        consumer.subscribe(List.of(args[1]), new ConsumerRebalanceListener() {
            public void onPartitionsRevoked(Collection<TopicPartition> tps) {
                say("revoked " + consumer.groupMetadata().generationId() + " " + partitions(tps));
            }
            public void onPartitionsAssigned(Collection<TopicPartition> tps) {
                say("added " + consumer.groupMetadata().generationId() + " " + partitions(tps));
            }
            public void onPartitionsLost(Collection<TopicPartition> tps) {
                say("lost " + partitions(tps));
            }
        });
        say("ready");
        Set<TopicPartition> last = Set.of();
        while (!stopping) {
            try {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(100))) {
                    say("record " + r.partition() + " " + r.offset() + " " + new String(r.value(), StandardCharsets.UTF_8));
                }
                Set<TopicPartition> now = consumer.assignment();
                if (!now.equals(last)) {
                    last = Set.copyOf(now);
                    say("assignment " + consumer.groupMetadata().generationId() + " " + partitions(now));
                }
            } catch (WakeupException e) {
                break;
            } catch (KafkaException e) {
                say("error " + e.getClass().getSimpleName() + ": " + e.getMessage());
            }
        }
        consumer.close(Duration.ofSeconds(10));
        say("closed");
    }
}
