// ShareWorker consumes a topic in a Kafka share group with Apache Kafka's
// own KafkaShareConsumer and acknowledges each record by a rule on its
// value, so that the broker itself archives and dead-letters records:
//
//   java ShareWorker BOOTSTRAP GROUP TOPIC IDLE_MS MAX_MS [reject=TEXT|release=TEXT]...
//
// A record whose value contains a reject TEXT is rejected, one containing a
// release TEXT is released (delivered again until the group's delivery
// limit archives it), any other is accepted. Each acknowledgement is
// printed as one tab-separated line: ACTION TOPIC PARTITION OFFSET
// DELIVERY_COUNT EVENT_ID VALUE. It stops once IDLE_MS pass without a
// record after the first one, or after MAX_MS in all.
//
// Two more modes stand in for what a team's own tools do, for the
// runbook's rehearsal:
//
//   java ShareWorker setup BOOTSTRAP GROUP TOPIC   create TOPIC (one partition) and have
//                                                  GROUP start at its beginning
//   java ShareWorker produce BOOTSTRAP TOPIC VALUE...  one record per VALUE, its event_id
//                                                  header the value itself
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class ShareWorker {
    public static void main(String[] args) throws Exception {
        if (args.length >= 4 && args[0].equals("setup")) {
            setup(args[1], args[2], args[3]);
            return;
        }
        if (args.length >= 3 && args[0].equals("produce")) {
            produce(args[1], args[2], Arrays.copyOfRange(args, 3, args.length));
            return;
        }
        if (args.length < 5) {
            System.err.println("usage: ShareWorker BOOTSTRAP GROUP TOPIC IDLE_MS MAX_MS [reject=TEXT|release=TEXT]...");
            System.exit(2);
        }
        List<String> reject = new ArrayList<>(), release = new ArrayList<>();
        for (int i = 5; i < args.length; i++) {
            if (args[i].startsWith("reject=")) reject.add(args[i].substring(7));
            else if (args[i].startsWith("release=")) release.add(args[i].substring(8));
            else { System.err.println("unknown rule " + args[i]); System.exit(2); }
        }
        Properties p = new Properties();
        p.put("bootstrap.servers", args[0]);
        p.put("group.id", args[1]);
        p.put("share.acknowledgement.mode", "explicit");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long idle = Long.parseLong(args[3]), deadline = System.currentTimeMillis() + Long.parseLong(args[4]);
        long last = 0;
        try (KafkaShareConsumer<byte[], byte[]> c = new KafkaShareConsumer<>(p)) {
            c.subscribe(List.of(args[2]));
            while (System.currentTimeMillis() < deadline && (last == 0 || System.currentTimeMillis() - last < idle)) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                if (recs.isEmpty()) continue;
                last = System.currentTimeMillis();
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    String v = r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8);
                    AcknowledgeType t = AcknowledgeType.ACCEPT;
                    for (String s : release) if (v.contains(s)) t = AcknowledgeType.RELEASE;
                    for (String s : reject) if (v.contains(s)) t = AcknowledgeType.REJECT;
                    c.acknowledge(r, t);
                    Header id = r.headers().lastHeader("event_id");
                    System.out.println(t.name() + "\t" + r.topic() + "\t" + r.partition() + "\t" + r.offset() + "\t"
                            + r.deliveryCount().map(String::valueOf).orElse("") + "\t"
                            + (id == null ? "" : new String(id.value(), StandardCharsets.UTF_8)) + "\t"
                            + v.replace('\t', ' ').replace('\n', ' '));
                }
                c.commitSync(Duration.ofSeconds(30));
                System.out.flush();
            }
        }
    }

    static void setup(String bootstrap, String group, String topic) throws Exception {
        try (Admin a = Admin.create(Map.<String, Object>of("bootstrap.servers", bootstrap))) {
            try {
                a.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) throw e;
            }
            ConfigResource g = new ConfigResource(ConfigResource.Type.GROUP, group);
            a.incrementalAlterConfigs(Map.of(g, List.of(new AlterConfigOp(
                    new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)))).all().get();
        }
    }

    static void produce(String bootstrap, String topic, String[] values) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
            for (String v : values) {
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, 0, v, v);
                r.headers().add("event_id", v.getBytes(StandardCharsets.UTF_8));
                pr.send(r).get();
            }
        }
    }
}
